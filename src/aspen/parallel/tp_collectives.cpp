#include "aspen/parallel/tp_collectives.h"

#include <torch/autograd.h>

#include <string>
#include <utility>

#include "aspen/parallel/group_capsule.h"
#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// A private contiguous copy: all_reduce works in place, and neither a forward input
// nor an incoming gradient (which autograd may share) may be overwritten.
// An empty tensor skips the collective: shapes agree on every rank (the contract),
// so either every rank skips it or none does.
torch::Tensor summed(const torch::Tensor& x, ProcessGroupHandle group) {
  torch::Tensor buffer = x.clone(at::MemoryFormat::Contiguous);
  if (buffer.numel() > 0) group.all_reduce(buffer, ReduceOp::kSum);
  return buffer;
}

class CopyToTpRegion : public torch::autograd::Function<CopyToTpRegion> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const ProcessGroupHandle& group) {
    save_group(ctx, group);
    // Returning the input itself is allowed: autograd re-wraps it as a view that
    // carries this function's backward.
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {summed(grads[0], saved_group(ctx)), torch::Tensor()};
  }
};

class ReduceFromTpRegion : public torch::autograd::Function<ReduceFromTpRegion> {
 public:
  static torch::Tensor forward(AutogradContext*, const torch::Tensor& x,
                               const ProcessGroupHandle& group) {
    return summed(x, group);
  }
  static variable_list backward(AutogradContext*, variable_list grads) {
    return {grads[0], torch::Tensor()};
  }
};

class SumReplicaGrads : public torch::autograd::Function<SumReplicaGrads> {
 public:
  // blocks: distinct copies over the group (1: every rank holds the same one);
  // block: the copy this rank holds.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const ProcessGroupHandle& group, int64_t blocks, int64_t block) {
    save_group(ctx, group);
    ctx->saved_data["blocks"] = blocks;
    ctx->saved_data["block"] = block;
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const int64_t blocks = ctx->saved_data["blocks"].toInt();
    const int64_t block = ctx->saved_data["block"].toInt();
    const torch::Tensor& grad = grads[0];
    if (blocks == 1 || grad.numel() == 0) return {summed(grad, saved_group(ctx)), {}, {}, {}};
    // Each copy sums only over the ranks that hold it: every rank writes its
    // gradient into its own block of a zero buffer, one SUM over the whole group
    // adds up the ranks sharing a block, and each rank reads its block back.
    torch::Tensor buffer = torch::zeros({blocks, grad.numel()}, grad.options());
    buffer[block].copy_(grad.reshape({-1}));
    ProcessGroupHandle group = saved_group(ctx);
    group.all_reduce(buffer, ReduceOp::kSum);
    return {buffer[block].view(grad.sizes()), {}, {}, {}};
  }
};

}  // namespace

torch::Tensor copy_to_tp_region(const torch::Tensor& x, const TensorParallel& tp) {
  if (!tp.enabled()) return x;
  return CopyToTpRegion::apply(x, tp.require_group("copy_to_tp_region"));
}

torch::Tensor reduce_from_tp_region(const torch::Tensor& x, const TensorParallel& tp) {
  if (!tp.enabled()) return x;
  return ReduceFromTpRegion::apply(x, tp.require_group("reduce_from_tp_region"));
}

torch::Tensor sum_replica_grads(const torch::Tensor& x, const ShardSpec& spec,
                                const TensorParallel& tp) {
  if (!has_replicas(spec, tp.size)) return x;
  const std::string what = "sum_replica_grads";
  const ProcessGroupHandle group = tp.require_group(what);
  if (spec.replicated()) return SumReplicaGrads::apply(x, group, int64_t{1}, int64_t{0});
  check_input(tp.size % spec.blocks == 0,
              "TP size " + std::to_string(tp.size) + " is not a multiple of " +
                  std::to_string(spec.blocks) + " replicated blocks",
              what);
  const int64_t block = static_cast<int64_t>(tp.rank) * spec.blocks / tp.size;
  return SumReplicaGrads::apply(x, group, spec.blocks, block);
}

}  // namespace aspen::parallel
