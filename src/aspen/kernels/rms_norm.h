// RMSNorm as Qwen2/Qwen3 define it (HF Qwen2RMSNorm):
//   y = weight * (x * rsqrt(mean(x^2, -1) + eps)).to(x.dtype)
// The statistics are always computed in fp32, whatever the input dtype, and the
// normalised value is cast back before the weight multiply, so bf16 models round
// exactly where HF rounds.
//
// Shapes: x [N..., D] (any leading dims), weight [D]; output has x's shape and
// the promoted dtype of (x, weight) - the same dtype as x when both match.
//
// rms_norm() is an autograd Function whose backward recomputes nothing but the
// per-row inverse RMS it saved ([rows] fp32): it keeps x, not x_normed, alive.
// On the CPU, fp32 and bf16 inputs (weight of the same dtype) take a single-pass
// forward loop, also over [T, H, D] views whose rows are strided (the per-head norm of
// a fused q/k/v output), with the same two roundings for bf16; contiguous fp32 also a
// single-pass backward. Every other device/dtype runs the same math with composed ops. rms_norm_reference() is the plain
// composed-op formula the fused op is tested against.
//
// Thread safety: pure functions.
#pragma once

#include <torch/types.h>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

torch::Tensor rms_norm_reference(const torch::Tensor& x, const torch::Tensor& weight, double eps);

}  // namespace aspen::kernels
