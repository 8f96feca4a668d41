// The log-prob head's per-chunk softmax work on the CPU, fused into one pass over a
// chunk of logits (logprob_chunks.h runs the vocabulary loop around it).
//
// The head's chunk loop is a GEMM followed by elementwise work on its [T, n] output:
// the forward's online softmax statistics and the backward's softmax gradient. As
// composed torch ops that is about ten passes over a tensor of 19.5 MB (1,192 tokens x
// 4,096 vocabulary rows in fp32), each allocating its result: on the 103M bench shape
// it outweighed the head's GEMMs in a `perf record` of the update. Here each token's
// row (16 KB at n = 4,096) is read from memory once and worked on in L1, with AVX-512
// and the rows split across the intra-op pool.
//
// Shapes: logits [T, n] contiguous, fp32 or bf16: the raw GEMM output of one chunk,
// z = logits / temperature in fp32. targets [T] int64 are vocabulary rows; `begin` is
// the chunk's first row, so a target in [begin, begin + n) lies in this chunk. Every
// per-token tensor ([T]) is fp32 and contiguous.
//
// Numerics: fp32 throughout, exp by a degree-5 polynomial on the reduced argument
// (Cephes' expf, about 2 ulp) scaled by 2^k; sums in 16 lanes then across them. So
// results equal the composed ops' to fp32 rounding, not bit for bit
// (tests/kernels/logprob_chunk_cpu_test.cpp).
//
// Thread safety: pure functions of their inputs; they write only their outputs.
#pragma once

#include <torch/types.h>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {

// Whether this CPU runs the fused loops (AVX-512F/BW/VL, checked at run time).
bool logprob_chunk_cpu_available();

// Whether the fused loops take these logits: available, and logits a contiguous [T, n]
// CPU tensor in fp32 or bf16. Otherwise callers use the composed ops.
bool logprob_chunk_cpu_applies(const torch::Tensor& logits);

// One chunk into the online softmax state (each [T] fp32, updated in place):
//   m' = max(m, max_v z_v),  s' = s exp(m - m') + sum_v exp(z_v - m'),
//   a' = a exp(m - m') + sum_v exp(z_v - m') z_v   (only when with_entropy),
//   target_logit += z_target for rows whose target is in this chunk.
void logprob_chunk_stats_cpu(const torch::Tensor& logits, double temperature,
                             const torch::Tensor& targets, int64_t begin, bool with_entropy,
                             torch::Tensor& running_max, torch::Tensor& sum_exp,
                             torch::Tensor& sum_exp_logit, torch::Tensor& target_logit);

// The gradient of the chunk's logits, written to grad_z [T, n] (fp32 or bf16,
// contiguous; bf16 rounds to nearest even), with p = exp(z - lse):
//   grad_z = (grad_lp (onehot(target) - p) + grad_ent p (mean_logit - z)) / temperature.
// grad_lp and grad_ent may be undefined (no gradient from that output); mean_logit is
// read only with grad_ent.
void logprob_chunk_grad_cpu(const torch::Tensor& logits, double temperature,
                            const torch::Tensor& targets, int64_t begin, const torch::Tensor& lse,
                            const torch::Tensor& grad_lp, const torch::Tensor& grad_ent,
                            const torch::Tensor& mean_logit, torch::Tensor& grad_z);

// The same two loops over a chunk laid out transposed: logits_t [n, T] (the chunk's
// vocabulary rows by tokens, contiguous, fp32 or bf16; W_chunk @ hidden^T), with
// grad_z_t [n, T] likewise. Same statistics and gradient; the statistics fold in 64
// rows at a time, so their rounding differs from the row layout's, not their value.
// Why a second layout: the weight gradient grad_z^T @ hidden is a bf16 GEMM that
// oneDNN runs at 1.7x the time per FLOP when grad_z^T is a transposed view of a [T, n]
// tensor, and at the forward's speed when it is laid out [n, T] (4,096 x 1,192 x 512,
// 2 threads); a transposing copy costs as much as it saves (docs/benchmark-history.md).
void logprob_chunk_stats_t_cpu(const torch::Tensor& logits_t, double temperature,
                               const torch::Tensor& targets, int64_t begin, bool with_entropy,
                               torch::Tensor& running_max, torch::Tensor& sum_exp,
                               torch::Tensor& sum_exp_logit, torch::Tensor& target_logit);
void logprob_chunk_grad_t_cpu(const torch::Tensor& logits_t, double temperature,
                              const torch::Tensor& targets, int64_t begin,
                              const torch::Tensor& lse, const torch::Tensor& grad_lp,
                              const torch::Tensor& grad_ent, const torch::Tensor& mean_logit,
                              torch::Tensor& grad_z_t);

}  // namespace aspen::kernels
