// Rotary position embedding (RoPE), HF "rotate_half" convention as used by Qwen2/Qwen3:
//   inv_freq[i] = 1 / theta^(2i/D),  angle[t, i] = position[t] * inv_freq[i]   (i < D/2)
//   out = x * cat(cos, cos) + rotate_half(x) * cat(sin, sin),
//   rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]).
// Positions are given per token, so packed sequences simply pass positions that
// restart at 0 for each sequence.
//
// Shapes: T = tokens, H = heads, D = head_dim (even).
//   positions [T] int64;  RopeTable::cos/sin [T, D/2] fp32;  x [T, H, D].
//
// A RopeTable is the cos/sin cache of one forward pass: built once from the
// positions and shared by every layer (and by q and k). inv_freq and the angles
// are computed in fp32 exactly as HF does, so angles match HF's rounding.
// apply_rope() rotates in fp32 and casts back to x's dtype (fp64 stays fp64). It
// is an autograd Function whose backward is the inverse rotation (RoPE is
// orthogonal), so it saves only the table. apply_rope_reference() is the
// composed rotate_half formula it is tested against.
//
// Thread safety: pure functions; a RopeTable is immutable after construction.
#pragma once

#include <torch/types.h>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {

struct RopeTable {
  torch::Tensor cos;  // [T, D/2] fp32
  torch::Tensor sin;  // [T, D/2] fp32
};

// `positions` [T] int64 on the device the table should live on.
RopeTable make_rope_table(const torch::Tensor& positions, int64_t head_dim, double theta);
// The same from given inverse frequencies [D/2] fp32 (scaled RoPE, e.g. YaRN), with
// cos and sin multiplied by `scale` (YaRN's attention factor; HF's attention_scaling).
RopeTable make_rope_table(const torch::Tensor& positions, const torch::Tensor& inv_freq,
                          double scale = 1.0);

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTable& table);

torch::Tensor apply_rope_reference(const torch::Tensor& x, const RopeTable& table);

}  // namespace aspen::kernels
