// Causal self-attention over packed variable-length sequences (training/prefill).
//
// Shapes: T = packed tokens, B = sequences, H = query heads, K = key/value heads
// (H % K == 0, GQA: kv head j serves query heads j*H/K ... (j+1)*H/K - 1, which
// is HF repeat_kv's order), D = head_dim, L = one sequence's length.
//   q [T, H, D], k [T, K, D], v [T, K, D], cu_seqlens [B+1] int64 offsets
//   (cu_seqlens[0] = 0, non-decreasing, cu_seqlens[B] = T) -> out [T, H, D].
//
// Token t of sequence b attends to tokens of b at or before t, never across
// sequences. Works on sequences of equal length as one batch with composed ops
// (autograd is torch's), so it runs on any device; scores are [N, K, (H/K)*L, L]
// for the N sequences of length L - the query heads
// sharing a kv head are stacked instead of repeating k/v - and softmax is taken
// in fp32 (fp64 for fp64 inputs) then cast back, as HF's eager attention does.
// Cost is O(sum L^2): fine for sequences of a few thousand tokens on CPU.
//
// cu_seqlens may live on any device; it is read on the host (one small copy).
//
// Thread safety: pure function.
#pragma once

#include <torch/types.h>

namespace aspen {

torch::Tensor varlen_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& cu_seqlens,
                                      double scale);

}  // namespace aspen
