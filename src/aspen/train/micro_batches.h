// Sequence packing: turns rows of a TrainBatch into packed, pad-free micro-batches
// that fit a token budget, balanced so every micro-batch carries about the same
// number of tokens (the padding bubble is zero by construction; the skew between
// micro-batches is what balancing minimises).
//
// Shapes: T = packed tokens of a micro-batch (prompt + response per row), B = rows
// in it, R = its response tokens.
//   input_ids [T] int64, cu_seqlens [B+1] int64              -> model forward
//   logprob_index [R] int64: entries of QwenForCausalLM::token_logprobs() output
//       (n-1 per sequence) holding the response tokens
//   hidden_index [R] int64: positions in [T] whose hidden state predicts each response
//       token - response token j of a row with prompt length P sits at P + j and is
//       predicted from position P + j - 1 (also the critic's "state before token j")
//   target_ids [R] int64 = input_ids[hidden_index + 1]
//   response_cu_seqlens [B+1] int64                          -> algo::PackedSeqs
//   batch_token_index [R] int64: where each response token sits in the batch's token
//       columns (for scattering results back into batch order)
//   token_columns[name] [R], row_columns[name] [B]: the batch columns of these rows
//
// Planning (plan_micro_batches): rows are never split. A row longer than the budget
// gets a micro-batch of its own. The rest are placed longest first, each into the
// least-loaded of k micro-batches where it fits (LPT), k starting at
// ceil(tokens / budget) and growing until everything fits - the fewest micro-batches
// this greedy finds, with loads as even as it can make them.
//
// Thread safety: pure functions. Errors: aspen::Error for a budget < 1 or a bad row index.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "aspen/algo/packed.h"
#include "aspen/train/imports.h"
#include "aspen/train/train_batch.h"

namespace aspen::train {

// lengths[i] = tokens of row i -> micro-batches as lists of row positions into
// `lengths`, each list ascending. Oversized rows first, then the balanced bins.
std::vector<std::vector<int64_t>> plan_micro_batches(const std::vector<int64_t>& lengths,
                                                     int64_t max_tokens);

struct MicroBatch {
  std::vector<int64_t> rows;  // indices into the TrainBatch, in packed order
  torch::Tensor input_ids;
  torch::Tensor cu_seqlens;
  torch::Tensor logprob_index;
  torch::Tensor hidden_index;
  torch::Tensor target_ids;
  torch::Tensor response_cu_seqlens;
  torch::Tensor batch_token_index;
  std::map<std::string, torch::Tensor> token_columns;
  std::map<std::string, torch::Tensor> row_columns;
  int64_t num_tokens = 0;           // T
  int64_t num_response_tokens = 0;  // R
  // R's model tokens (the loss_mask column's ones; R without one): what the losses'
  // token-mean denominators and the token-weighted metrics count.
  int64_t num_loss_tokens = 0;
};

// The response layout of `micro_batch` for algo (response_cu_seqlens), carrying its
// loss_mask column when the batch has one (algo/packed.h).
PackedSeqs response_packing(const MicroBatch& micro_batch);

// Packs batch rows `rows` (in that order) into one micro-batch on `device`.
MicroBatch pack_rows(const TrainBatch& batch, const std::vector<int64_t>& rows,
                     torch::Device device);

// Plans `rows` of `batch` under the budget and packs each micro-batch.
std::vector<MicroBatch> make_micro_batches(const TrainBatch& batch,
                                           const std::vector<int64_t>& rows, int64_t max_tokens,
                                           torch::Device device);
// The same over every row of `batch`, in order (a forward-only pass over the batch).
std::vector<MicroBatch> make_micro_batches(const TrainBatch& batch, int64_t max_tokens,
                                           torch::Device device);

struct PackingStats {
  int64_t micro_batches = 0;
  int64_t tokens = 0;      // sum of T: every one a real token
  int64_t padding = 0;     // pad tokens: always 0 in this layout, reported for the bubble account
  int64_t max_tokens = 0;  // largest micro-batch
  int64_t min_tokens = 0;  // smallest micro-batch
};
PackingStats packing_stats(const std::vector<MicroBatch>& micro_batches);

}  // namespace aspen::train
