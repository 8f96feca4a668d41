// Loss aggregation: how a per-token loss l [T] over B packed sequences becomes
// one scalar. The single implementation every loss in algo uses (policy, value,
// KL, entropy), with verl's mode names.
//
// With N = token denominator, S = sequence denominator, L_b = |sequence b|:
//   "token-mean"              sum_t l_t / N                         (DAPO)
//   "seq-mean-token-mean"     sum_b ( sum_{t in b} l_t / L_b ) / S   (GRPO paper, GSPO)
//   "seq-mean-token-sum"      sum_b ( sum_{t in b} l_t ) / S
//   "seq-mean-token-sum-norm" sum_b ( sum_{t in b} l_t / C ) / S     (Dr. GRPO: a constant C,
//                                                                    e.g. the max response length)
// N defaults to this batch's T and S to its B. Empty sequences contribute 0
// (L_b is clamped to 1). An empty batch aggregates to 0.
// Loss mask (packed.h): the sums run over model tokens only (environment tokens add
// exactly 0, whatever their value, and no gradient), N defaults to the model tokens
// and L_b is row b's model tokens (verl's agg_loss with response_mask). S still
// counts every row: a row's share does not depend on how many tool turns it had.
//
// Global denominators: a global batch split into micro-batches (gradient
// accumulation) and/or data-parallel ranks is normalised exactly like the whole
// batch when every piece passes the GLOBAL token count N (token-mean) or the
// GLOBAL sequence count S (seq-mean-*): then sum over pieces of aggregate(piece)
// == aggregate(whole), and so are the gradients. Pieces must hold whole
// sequences. If the data-parallel gradient all-reduce AVERAGES over ranks, scale
// the loss by the world size (the sum above is what must be reproduced).
//
// Thread safety: pure functions.
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

#include "aspen/algo/imports.h"
#include "aspen/algo/packed.h"

namespace aspen::algo {

enum class AggMode { kTokenMean, kSeqMeanTokenMean, kSeqMeanTokenSum, kSeqMeanTokenSumNorm };

// verl's spelling of `mode` (the config's spellings: config/train_config_fields.h).
std::string agg_mode_name(AggMode mode);

struct AggOptions {
  AggMode mode = AggMode::kTokenMean;
  std::optional<double> global_tokens;  // N for token-mean; > 0
  std::optional<double> global_seqs;    // S for seq-mean-*; > 0
  double norm_length = 0.0;             // C for seq-mean-token-sum-norm; must be > 0 there
};

// per_token [T] -> 0-dim tensor in per_token's dtype, differentiable.
torch::Tensor aggregate(const torch::Tensor& per_token, const PackedSeqs& packed,
                        const AggOptions& options);

// Plain mean over this batch's tokens, detached: what metrics report (0 if T = 0).
torch::Tensor token_mean_metric(const torch::Tensor& per_token);
// The same over `packed`'s model tokens (0 if none); token_mean_metric(x) without a mask.
torch::Tensor token_mean_metric(const torch::Tensor& per_token, const PackedSeqs& packed);

}  // namespace aspen::algo
