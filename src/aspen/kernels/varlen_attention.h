// Causal self-attention over packed variable-length sequences (training/prefill).
//
// Shapes: T = packed tokens, B = sequences, H = query heads, K = key/value heads
// (H % K == 0, GQA: kv head j serves query heads j*H/K ... (j+1)*H/K - 1, which
// is HF repeat_kv's order), D = head_dim, L = one sequence's length.
//   q [T, H, D], k [T, K, D], v [T, K, D], cu_seqlens [B+1] int64 offsets
//   (cu_seqlens[0] = 0, non-decreasing, cu_seqlens[B] = T) -> out [T, H, D].
//
// Token t of sequence b attends to tokens of b at or before t, never across
// sequences. Sequences of equal length are attended as one batch through torch's
// fused scaled_dot_product_attention (causal, GQA without repeating k/v; flash
// attention on CPU and CUDA for fp32/bf16, softmax statistics in fp32; the math
// kernel for fp64), so it runs on any device and autograd is torch's. On CPU, bf16
// and fp16 inputs are attended in fp32 (1.6-2.2x as fast there) and the output rounded
// back to the input dtype. Cost is O(sum L^2) compute and O(sum L) memory.
//
// cu_seqlens may live on any device; it is read on the host (one small copy).
//
// Thread safety: pure function.
#pragma once

#include <torch/types.h>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {

torch::Tensor varlen_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& cu_seqlens,
                                      double scale);

}  // namespace aspen::kernels
