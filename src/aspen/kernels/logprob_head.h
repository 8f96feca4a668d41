// Per-token log-probabilities (and entropy) of a language-model head, computed in
// vocabulary chunks so that no [T x V] tensor is ever materialised.
//
// Shapes: T = tokens, C = hidden size, V = vocab, N = chunk_size.
//   hidden [T, C], weight [V, C] (lm_head), targets [T] int64 in [0, V)
//   -> logprobs [T] fp32: log softmax(hidden @ weight^T / temperature)[t, targets[t]]
//   -> entropy  [T] fp32: -sum_v p log p of the same distribution (optional).
//
// Forward streams over vocab chunks of N rows of `weight` and keeps per token an
// online softmax state - running max m, sum s of exp(logit - m), the target logit
// and, for entropy, a = sum exp(logit - m) * logit - so memory is O(T*N).
// logsumexp = m + log s; entropy = logsumexp - a / s.
// Backward recomputes each chunk's logits (or reads them back: saved_logits_max_bytes)
// and accumulates grad_hidden [T, C] and grad_weight [V, C] chunk by chunk, with
//   d logprob_t / d z_v = (v == target_t) - p_v
//   d entropy_t / d z_v = p_v * (E_p[z] - z_v)
// (z = logits / temperature; the chain rule then divides by temperature).
// Matmuls run in fp32 (fp64 for fp64 inputs) whatever the input dtype, unless
// gemm_in_input_dtype: then bf16 inputs multiply in bf16 (the GEMM accumulates in fp32
// inside, its logits are rounded to bf16, as eager autocast's lm_head) and everything
// after - max, log-sum-exp, entropy, the backward's softmax - stays in fp32; on the
// 103M bench shape, whose head is 76% of the matmul FLOPs, that is most of the bf16
// update (docs/benchmark-history.md). Log-probs then differ from the fp32 head by the logits'
// bf16 rounding (tests/kernels/logprob_head_test.cpp bounds it). Gradients are
// returned in the input dtypes. Works on any device (composed ops per chunk).
// The chunk loops live in logprob_chunks.h, shared with the vocab-parallel head of
// tensor parallelism (model/vocab_parallel_logprobs.h).
//
// Thread safety: pure function. Errors: TORCH_CHECK on shape/dtype misuse; a
// target outside [0, V) is a TORCH_CHECK failure (callers validate token ids).
#pragma once

#include <torch/types.h>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {

struct LogprobHeadOptions {
  double temperature = 1.0;
  int64_t chunk_size = 4096;  // vocabulary rows per chunk; need not divide V
  bool with_entropy = false;
  bool gemm_in_input_dtype = false;  // bf16 inputs: the GEMMs in bf16 (above)
  // When a gradient will be taken, the forward keeps its logits ([T, V] in the GEMM
  // dtype) for the backward if they take at most this many bytes, and the backward
  // then skips its recomputing GEMM: three head GEMMs instead of four. 0: always
  // recompute (O(T*N) memory). The fused CPU path only (logprob_chunk_cpu.h).
  int64_t saved_logits_max_bytes = int64_t{1} << 30;
};

struct TokenLogprobs {
  torch::Tensor logprobs;  // [T] fp32
  torch::Tensor entropy;   // [T] fp32; undefined unless options.with_entropy
};

TokenLogprobs chunked_logprobs(const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& targets, const LogprobHeadOptions& options);

// Composed reference: full [T, V] log_softmax. For tests and tiny vocabularies only.
TokenLogprobs logprobs_reference(const torch::Tensor& hidden, const torch::Tensor& weight,
                                 const torch::Tensor& targets, const LogprobHeadOptions& options);

}  // namespace aspen::kernels
