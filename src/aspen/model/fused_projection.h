// FusedProjection: several Linear layers that read the same input (q/k/v of an
// attention block, gate/up of an MLP) laid out in ONE weight matrix, so that an
// inference step runs one GEMM over the input instead of one per projection.
//
// How: fuse() allocates W = [sum of out_features, in_features] (and one bias when
// every member has one), copies the members' current values into it, and points each
// member's parameter at its rows of W (Tensor::set_data). The parameters keep their
// names, shapes, requires_grad and autograd identity, so loading, saving, weight
// publish, the optimizer and the resharder see no difference; an in-place update of a
// parameter (Tensor::copy_, an optimizer step) updates W, because it IS W's memory.
//
// Members that already lie back to back in one tensor (a model whose weights view
// another's fused W: model/shared_base.h) are adopted as they are: that tensor becomes
// W, nothing is copied, and the weights stay held once.
//
// What unfuses: anything that gives a member a new storage (Module::to to another
// dtype or device, set_data). intact() notices - it compares each member's data
// pointer with its rows of W - and the caller falls back to the separate GEMMs;
// fuse() again restores the layout (one copy of the members).
//
// forward(x) is inference only: it is not differentiable with respect to the
// members (their gradients would not flow through W), so usable_for_inference()
// refuses it while autograd records and a member requires grad.
//
// forward() runs kernels/small_batch_linear.h: a decode step's few rows stream W once.
// Shapes: x [T, in] -> [T, sum out]; split() returns the members' column blocks as
// views [T, out_i] (strided: rows of length sum out).
// Thread safety: fuse() mutates the members (call it before sharing the module across
// threads: e.g. when a rollout engine takes its model); intact(),
// usable_for_inference(), forward() and split() are const and safe to call
// concurrently.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "aspen/model/imports.h"

namespace aspen::model {

class FusedProjection {
 public:
  // Fuses `members` (at least one; same in_features, dtype and device; all with or
  // all without bias). Idempotent: a no-op when the members already share an intact
  // W. Throws aspen::Error naming the member that does not fit.
  void fuse(const std::vector<torch::nn::Linear>& members);

  // True when fuse() ran and every member still views its rows of W.
  bool intact() const;
  // intact(), and forward() would give the members' outputs: no gradient is wanted
  // (autograd is off, or no member requires grad).
  bool usable_for_inference() const;

  torch::Tensor forward(const torch::Tensor& x) const;
  std::vector<torch::Tensor> split(const torch::Tensor& fused_output) const;

 private:
  std::vector<torch::nn::Linear> members_;
  std::vector<int64_t> widths_;  // out_features of each member, in order
  torch::Tensor weight_;         // [sum widths, in]
  torch::Tensor bias_;           // [sum widths] or undefined
};

}  // namespace aspen::model
