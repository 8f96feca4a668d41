// The vocabulary-chunk loops behind the log-prob/entropy head (logprob_head.h),
// shared by the single-rank head (chunked_logprobs) and the vocab-parallel head
// (model/vocab_parallel_logprobs.h), which runs the same loops over its rank's
// vocabulary rows and combines the per-token statistics across ranks.
//
// Shapes: T = tokens, C = hidden size, R = rows of `weight` (the whole vocabulary,
// or one rank's slice of it), N = chunk size. "acc" is the accumulation dtype:
// fp64 for fp64 hidden states, fp32 otherwise (head_acc_dtype).
//   hidden_gemm [T, C]: hidden in acc (the default), or as it is (bf16) when the head
//   runs its GEMMs in the input dtype (head_gemm_input), weight [R, C] any float dtype,
//   targets [T] int64 as ROW INDICES of `weight`: a target outside [0, R) (a token
//   another rank owns) contributes nothing to target_logit nor to the one-hot term
//   of the backward.
// z = hidden @ weight^T / temperature are the logits; they exist only chunk by chunk.
//
// Thread safety: pure functions. Errors: TORCH_CHECK for misuse (these are internal
// building blocks; the public entry points validate their inputs first).
#pragma once

#include <torch/autograd.h>
#include <torch/types.h>

#include <utility>

#include "aspen/kernels/imports.h"
#include "aspen/kernels/logprob_head.h"

namespace aspen::kernels {

torch::ScalarType head_acc_dtype(const torch::Tensor& hidden);

// TORCH_CHECK-validates the head inputs: hidden [T, C], weight [V_local, C], targets
// [T] int64 in [0, vocab) (range checked on host tensors only), positive options.
// `vocab` is the full vocabulary (V_local for the single-rank head); `caller` prefixes
// the messages.
void check_head_inputs(const torch::Tensor& hidden, const torch::Tensor& weight,
                       const torch::Tensor& targets, const LogprobHeadOptions& options,
                       int64_t vocab, const char* caller);

// Online-softmax state per token [T] (acc), relative to the running max m:
struct SoftmaxStats {
  torch::Tensor running_max;    // m = max_v z_v
  torch::Tensor sum_exp;        // s = sum_v exp(z_v - m)
  torch::Tensor sum_exp_logit;  // a = sum_v exp(z_v - m) * z_v (zeros unless with_entropy)
  torch::Tensor target_logit;   // z_target when the target is a row of weight, else 0
};

// What the GEMMs multiply: hidden in acc, or hidden itself with gemm_in_input_dtype.
torch::Tensor head_gemm_input(const torch::Tensor& hidden, bool gemm_in_input_dtype);

// One streaming pass over the rows of `weight`, N rows at a time; the statistics in acc
// whatever hidden_gemm's dtype. With `kept_logits` non-null and the fused CPU path
// taken, the raw logits of every chunk are kept there, chunk after chunk (chunk
// [begin, begin + n) is the contiguous [T, n] block at element T * begin; [n, T]
// for bf16 GEMMs on the fused CPU path, logprob_chunks.cpp), for
// head_backward to reuse; otherwise it is left undefined.
SoftmaxStats online_softmax_stats(const torch::Tensor& hidden_gemm, const torch::Tensor& weight,
                                  const torch::Tensor& targets, double temperature,
                                  int64_t chunk_size, bool with_entropy,
                                  torch::Tensor* kept_logits = nullptr);

// Whether a head forward should keep its logits for the backward: a gradient will be
// taken (hidden or weight requires one) and [T, rows] in the GEMM dtype fits
// options.saved_logits_max_bytes.
bool keep_head_logits(const torch::Tensor& hidden_gemm, const torch::Tensor& hidden,
                      const torch::Tensor& weight, int64_t max_bytes);

// What the head returns and what its backward needs, from stats over the WHOLE
// vocabulary: lse = m + log s, logprobs = target_logit - lse, mean_logit = a / s
// (E_p[z]; zeros without entropy), entropy = lse - mean_logit.
struct HeadResult {
  torch::Tensor lse;         // [T] acc
  torch::Tensor mean_logit;  // [T] acc
  torch::Tensor logprobs;    // [T] acc
  torch::Tensor entropy;     // [T] acc; undefined unless with_entropy
};
HeadResult finish_head(const SoftmaxStats& stats, bool with_entropy);

// For a head autograd Function's forward: saves (hidden, weight, targets, lse,
// mean_logit, kept_logits (may be undefined), temperature, chunk_size,
// gemm_in_input_dtype) in ctx and returns the Function's outputs, {logprobs} or
// {logprobs, entropy}, in fp32 (fp64 for fp64 hidden).
torch::autograd::variable_list save_head_for_backward(
    torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
    const torch::Tensor& targets, const HeadResult& result, double temperature, int64_t chunk_size,
    bool gemm_in_input_dtype, const torch::Tensor& kept_logits = torch::Tensor());

// The matching backward: recomputes each chunk's logits (or reads the kept ones) and,
// with p = exp(z - lse),
//   d logprob_t / d z_v = (v == target_t) - p_v,   d entropy_t / d z_v = p_v (E_p[z] - z_v),
// returns {grad_hidden [T, C] in hidden's dtype, grad_weight [R, C] in weight's dtype}
// (with gemm_in_input_dtype: grad_z rounded to hidden's dtype for the two GEMMs, whose
// products are summed in acc);
// each is undefined unless ctx->needs_input_grad(0) resp. (1). For a vocabulary slice,
// grad_hidden is this slice's partial sum and grad_weight is exact for its rows.
std::pair<torch::Tensor, torch::Tensor> head_backward(
    torch::autograd::AutogradContext* ctx, const torch::autograd::variable_list& grad_outputs);

}  // namespace aspen::kernels
