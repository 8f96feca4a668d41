// ModelRunner: turns one scheduler step into a forward pass over the paged KV
// cache and returns the logits of every sequence whose pending tokens the step
// completes (its last token's logits give its next token).
//
// Shapes: T = tokens scheduled this step, B = scheduled sequences, R = sequences
// completed this step, V = vocab.
// Thread safety: none; one runner per engine thread.
#pragma once

#include <torch/types.h>

#include <vector>

#include "aspen/model/qwen_model.h"
#include "aspen/rollout/imports.h"
#include "aspen/rollout/kv_cache.h"
#include "aspen/rollout/scheduler.h"

namespace aspen::rollout {

struct StepLogits {
  torch::Tensor logits;               // [R, V] fp32 on the CPU
  std::vector<size_t> chunk_indices;  // which step.chunks each row belongs to
  // With routing recorded (a MoE model): [R, S, k] int32 on the CPU, the experts each
  // sparse layer (S of them) chose at the position whose logits are row r - the
  // routing behind the token sampled from it.
  torch::Tensor routed_experts;
};

class ModelRunner {
 public:
  // record_routing: fill StepLogits::routed_experts (ignored for a dense model).
  // Fuses the model's q/k/v and gate/up projections (QwenForCausalLM::fuse_projections).
  ModelRunner(QwenForCausalLM model, KvCache& cache, bool record_routing = false);

  StepLogits run(const SchedulerStep& step);

  QwenForCausalLM& model() { return model_; }

 private:
  QwenForCausalLM model_;
  KvCache& cache_;
  bool record_routing_ = false;
};

}  // namespace aspen::rollout
