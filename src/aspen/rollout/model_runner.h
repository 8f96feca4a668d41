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
#include "aspen/rollout/kv_cache.h"
#include "aspen/rollout/scheduler.h"

namespace aspen {

struct StepLogits {
  torch::Tensor logits;               // [R, V] fp32 on the CPU
  std::vector<size_t> chunk_indices;  // which step.chunks each row belongs to
};

class ModelRunner {
 public:
  ModelRunner(QwenForCausalLM model, KvCache& cache);

  StepLogits run(const SchedulerStep& step);

  QwenForCausalLM& model() { return model_; }

 private:
  QwenForCausalLM model_;
  KvCache& cache_;
};

}  // namespace aspen
