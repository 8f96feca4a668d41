// Autograd-paired collectives of Megatron-style tensor parallelism. Each is a
// torch::autograd::Function whose forward and backward issue the collectives that
// keep activations and gradients consistent across the ranks of a TP group:
//
//                     forward                   backward
//   copy_to_tp_region     identity                  all-reduce SUM of the gradient
//   reduce_from_tp_region all-reduce SUM            identity
//   sum_replica_grads     identity                  SUM of the gradient over the ranks
//                                                   holding the same copy of x
//
// copy_to_tp_region goes on the (replicated) input of a column-parallel block: each
// rank back-propagates only its own columns, so the input gradients are partial
// sums. reduce_from_tp_region goes on the output of a row-parallel block (and of the
// vocab-parallel embedding), whose per-rank outputs are partial sums. A
// column-then-row pair thus costs one all-reduce per direction.
//
// sum_replica_grads wraps a PARAMETER that several ranks hold identical copies of
// but that only sees part of the computation on each: q_norm/k_norm weights (every
// rank, local heads only) and kv heads when num_key_value_heads < TP size (ranks
// with the same kv head, each with its own q heads). `spec` is the parameter's
// layout (shard_spec.h); ranks holding block r*blocks/size of it are summed. It is
// implemented as one all-reduce over the whole TP group of a zero [blocks, numel]
// buffer holding each rank's gradient in its block (no subgroups are needed).
// Do NOT use it on replicated parameters whose inputs and output gradients are
// already full on every rank (the pre-attention/pre-MLP/final norms): their
// gradients are complete without it.
//
// Shapes: any; x is returned with its own shape, dtype and device. The collectives
// need contiguous buffers, so the reductions copy (one clone of x or of its grad).
// With tp.size == 1 every function returns x unchanged and records nothing.
// Ordering: like every c10d collective, each rank must make the same calls in the
// same order; forward and backward of identical graphs on every rank do.
// Thread safety: as ProcessGroupHandle - one thread per group at a time.
// Errors: aspen::Error from a failed collective (usually a dead peer) or when tp is
// enabled without a group; aspen::Error for a spec that does not describe
// replication at tp.size.
#pragma once

#include <torch/torch.h>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/shard_spec.h"
#include "aspen/parallel/tensor_parallel.h"

namespace aspen::parallel {

torch::Tensor copy_to_tp_region(const torch::Tensor& x, const TensorParallel& tp);

torch::Tensor reduce_from_tp_region(const torch::Tensor& x, const TensorParallel& tp);

// Identity when !has_replicas(spec, tp.size).
torch::Tensor sum_replica_grads(const torch::Tensor& x, const ShardSpec& spec,
                                const TensorParallel& tp);

}  // namespace aspen::parallel
