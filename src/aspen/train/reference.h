// ReferencePolicy: a frozen copy of the initial policy, used only for ref log-probs
// (the KL anchor of GRPO/PPO). It copies the weights at construction, so later
// updates of the actor's model do not leak into it; no parameter requires grad and
// no optimizer state exists.
// With LoRA (the policy has adapters, model/lora.h) the base never changes, so the
// reference is the policy itself with its adapters off (LoraDisabled, on the calling
// thread only): no second copy of the weights. holds_copy() tells which.
// Shapes: compute_logprobs -> [R] (R = response tokens of the batch), batch order.
// Thread safety: compute_logprobs mutates nothing and may run concurrently with
// itself (it is the model's forward under NoGradGuard). Under LoRA it must not overlap
// an update of the policy's adapters (it reads the policy's base).
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "aspen/kernels/logprob_head.h"
#include "aspen/model/qwen_model.h"
#include "aspen/train/imports.h"
#include "aspen/train/train_batch.h"

namespace aspen::train {

struct ReferenceOptions {
  torch::ScalarType dtype = torch::kFloat;  // e.g. bf16 to halve its memory
  LogprobHeadOptions head;                   // temperature must match the actor's
  int64_t max_tokens_per_micro_batch = 8192;
};

class ReferencePolicy {
 public:
  ReferencePolicy(const QwenForCausalLM& policy, const ReferenceOptions& options);

  torch::Tensor compute_logprobs(const TrainBatch& batch);

  QwenForCausalLM& model() { return model_; }
  // False when the reference is the LoRA policy's base (nothing of its own to save).
  bool holds_copy() const { return !model_->has_lora(); }

 private:
  ReferenceOptions options_;
  QwenForCausalLM model_;
};

}  // namespace aspen::train
