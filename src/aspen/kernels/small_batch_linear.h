// y = x W^T (+ b) for inference at a small batch: the decode step's GEMMs.
//
// At M <= small_batch_max_rows(dtype) rows a linear layer is a matrix-vector product: each weight
// byte is read once and used M times, so it runs at the speed of memory, and what
// matters is streaming W at full bandwidth. torch's CPU GEMMs fall short of that at
// this shape, measured on the 0.6B shapes (docs/benchmarks.md, "Small-batch linear"):
// at 2-8 rows they read W at about half the one-row speed, and in bf16 even one row
// runs slower per byte than fp32. This kernel reads each row of W once, as dot
// products with AVX-512 (vdpbf16ps for bf16: pairs of bf16 products summed in fp32),
// 4 rows of W at a time (2 past 4 input rows) for independent accumulators, rows split
// across the intra-op pool, each step prefetching the same cache line of the next
// block's rows: a 1,024-wide
// bf16 row is half a 4 KB page, and the hardware streamer stops at page ends. With the
// prefetch the vocabulary head (311 MB in bf16) streams at 20.6 GB/s against torch's
// 17.3 at one row and 2 threads, where without it the kernel had been 0.84x of torch.
//
// Numerics: products and sums in fp32, the result rounded once to x's dtype (bias
// added in fp32 before that rounding): the contract of at::linear on the CPU. Only the
// order of the fp32 sum differs from torch's, so results agree to fp32 rounding of
// the accumulator before the final cast.
//
// small_batch_linear() takes this kernel when it applies - CPU tensors, x [M, K] with
// M <= small_batch_max_rows(dtype) and unit stride along K, W [N, K] contiguous, bias [N] or
// undefined, all fp32 or all bf16, no gradient wanted (autograd off or nothing
// requires grad), and a CPU with AVX-512F (+ AVX512-BF16 for bf16) - and at::linear
// otherwise, so it is a drop-in for torch::nn::functional::linear on any input.
//
// Thread safety: pure functions.
#pragma once

#include <torch/types.h>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {

// The most input rows the kernel takes: 8 in fp32, 4 in bf16 (see the .cpp), 0 for
// other dtypes.
int64_t small_batch_max_rows(torch::ScalarType dtype);

torch::Tensor small_batch_linear(const torch::Tensor& x, const torch::Tensor& weight,
                                 const torch::Tensor& bias = {});

// Whether small_batch_linear would run its own kernel on these inputs.
bool small_batch_kernel_applies(const torch::Tensor& x, const torch::Tensor& weight,
                                const torch::Tensor& bias = {});

}  // namespace aspen::kernels
