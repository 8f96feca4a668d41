// SwiGLU gate of the Qwen MLP: out = silu(gate) * up, silu(g) = g * sigmoid(g).
//
// Shapes: gate, up [N..., I] (I = intermediate size, same shape and dtype); out likewise.
//
// swiglu() is an autograd Function that saves only gate and up and recomputes
// sigmoid in backward, so the silu(gate) activation [N..., I] is not kept alive
// between forward and backward (it is the largest activation of the MLP).
// Composed ops, so it runs on every device. swiglu_reference() is the plain
// formula it is tested against.
//
// Thread safety: pure functions.
#pragma once

#include <torch/types.h>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {

torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up);

torch::Tensor swiglu_reference(const torch::Tensor& gate, const torch::Tensor& up);

}  // namespace aspen::kernels
