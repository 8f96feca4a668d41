// Small-batch linear benchmark (`aspen bench linear`): the decode step's GEMMs, timed
// through at::linear (torch's oneDNN/MKL path) and through small_batch_linear
// (kernels/small_batch_linear.h) on the same tensors, in one run.
//
// Shapes: the Qwen3-0.6B decode projections (hidden 1024: fused q/k/v 4096x1024, o_proj
// 1024x2048, fused gate/up 6144x1024, down_proj 1024x3072, the 151,936-row head), each
// as y[M, N] = x[M, K] W[N, K]^T for M in {1, 4}, in fp32 and bf16.
// Reports JSON: {"threads", "cases": [{"shape", "n", "k", "m", "dtype",
// "torch_ms", "kernel_ms", "speedup" (torch_ms / kernel_ms), "torch_gb_per_s",
// "kernel_gb_per_s" (weight bytes / time), "kernel_applies", "max_abs_diff"}]}.
// Each timing is the median of repeated calls after a warm-up, each repeat at least
// `min_seconds` / (cases * 2) long. Where the kernel does not apply (no AVX-512 or
// AVX512-BF16) both columns time at::linear and kernel_applies is false.
#pragma once

#include <nlohmann/json.hpp>

#include "bench/imports.h"

namespace aspen::bench {

nlohmann::json run_linear_bench(double min_seconds);

}  // namespace aspen::bench
