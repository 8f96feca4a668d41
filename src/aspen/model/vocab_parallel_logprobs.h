// Vocab-parallel log-prob/entropy head (Megatron's vocab-parallel cross-entropy,
// extended with entropy): each TP rank holds V/t rows of the head matrix and the
// full vocabulary is never gathered, nor is any [T, V] tensor formed.
//
// Shapes: T = tokens, C = hidden size, V = full vocabulary, t = TP size.
//   hidden [T, C], the same on every rank; weight_shard [V/t, C] = rows
//   [vocab_begin, vocab_begin + V/t) of the head; targets [T] int64 GLOBAL ids in [0, V)
//   -> logprobs [T] and, with options.with_entropy, entropy [T] (fp32; fp64 for fp64
//      hidden), identical on every rank and equal to chunked_logprobs on the full head.
//
// Forward: every rank runs the chunked online softmax (kernels/logprob_chunks.h) over
// its rows, then exactly three all-reduces of per-token scalars combine the ranks:
//   SUM of the target logit (only the rank owning the target contributes),
//   MAX of the running max m,
//   SUM of [s, a] rescaled to the global max (s = sum exp(z - m), and a = sum
//       exp(z - m) z for the entropy, stacked into the same all-reduce).
// Backward: no collective inside; each rank recomputes its chunks' logits with the
// global logsumexp and E_p[z], giving its exact weight_shard gradient and a PARTIAL
// hidden gradient, which the copy_to_tp_region this function puts on `hidden` sums
// over the ranks. So the returned hidden gradient is complete.
// With tp.size == 1 this is chunked_logprobs (vocab_begin must be 0).
//
// Thread safety: as tp_collectives.h (same calls in the same order on every rank).
// Errors: TORCH_CHECK on shape misuse and host targets outside [0, V) (callers
// validate token ids); aspen::Error from a failed collective.
#pragma once

#include <torch/torch.h>

#include "aspen/kernels/logprob_head.h"
#include "aspen/model/imports.h"
#include "aspen/parallel/tensor_parallel.h"

namespace aspen::model {

TokenLogprobs vocab_parallel_logprobs(const torch::Tensor& hidden,
                                      const torch::Tensor& weight_shard,
                                      const torch::Tensor& targets, int64_t vocab_begin,
                                      const LogprobHeadOptions& options, const TensorParallel& tp);

}  // namespace aspen::model
