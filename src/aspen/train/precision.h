// Mixed precision with fp32 master weights.
//
// The model used for forward/backward (the "compute" model) may be bf16; the
// optimizer then updates an fp32 master copy:
//   backward on compute -> accumulate_grads(): master.grad += fp32(compute.grad),
//   compute.grad cleared -> optimizer step on master -> publish(): compute <- master.
// Accumulating into fp32 after every micro-batch keeps gradient accumulation in fp32
// (bf16 sums of many micro-batches would lose the small ones).
// When compute and master are the same tensors (fp32 training) every call is a no-op,
// so trainers call them unconditionally.
//
// Contract: `master` and `compute` list the same names in the same order with equal
// shapes; the master tensors are leaves that require grad.
// Thread safety: not thread-safe; the trainer thread owns both models.
#pragma once

#include <torch/torch.h>

#include "aspen/train/imports.h"
#include "aspen/train/optimizer.h"

namespace aspen::train {

class MasterWeights {
 public:
  // Copies master -> compute once (so a freshly built compute model matches).
  MasterWeights(NamedParams master, NamedParams compute);

  const NamedParams& master() const { return master_; }
  bool separate() const { return separate_; }

  void accumulate_grads();
  void publish();
  // accumulate_grads(), then the optimizer step, then publish() unless skipped.
  StepResult step(Optimizer& optimizer);

 private:
  NamedParams master_;
  NamedParams compute_;
  bool separate_ = false;
};

// Parameters of `module` that require grad, by their registered (HF) names.
NamedParams trainable_params(const torch::nn::Module& module);

}  // namespace aspen::train
