// ModelRunner: turns one scheduler step into a forward pass over the paged KV
// cache and returns the logits of every sequence whose pending tokens the step
// completes (its last token's logits give its next token).
//
// Host traffic per step: one host-to-device copy of everything the step needs (token
// ids, positions, slots, block tables, the attention's gather indices; pinned and
// non_blocking on CUDA) and, with routing recorded, one copy of the routed experts
// back. The layout is checked once on the host and travels in PagedBatch::layout, so
// no layer reads a device value.
//
// Shapes: T = tokens scheduled this step, B = scheduled sequences, R = sequences
// completed this step, V = vocab.
// Thread safety: none; one runner per engine thread.
#pragma once

#include <torch/types.h>

#include <memory>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "aspen/rollout/decode_graphs.h"
#include "aspen/rollout/imports.h"
#include "aspen/rollout/kv_cache.h"
#include "aspen/rollout/scheduler.h"

namespace aspen::rollout {

struct StepLogits {
  // [R, V] on the model's device: fp32 on the CPU; elsewhere in the model's dtype, left
  // there for the device sampler (device_sampler.h).
  torch::Tensor logits;
  std::vector<size_t> chunk_indices;  // which step.chunks each row belongs to
  // With routing recorded (a MoE model): [R, S, k] int32 on the CPU, the experts each
  // sparse layer (S of them) chose at the position whose logits are row r - the
  // routing behind the token sampled from it.
  torch::Tensor routed_experts;
};

class ModelRunner {
 public:
  // record_routing: fill StepLogits::routed_experts (ignored for a dense model).
  // device_code_path: prepare the gathered attention's groups even on the CPU, so the
  // model takes a GPU's attention path there (EngineConfig::device_code_path).
  // Fuses the model's q/k/v and gate/up projections (QwenForCausalLM::fuse_projections).
  ModelRunner(QwenForCausalLM model, KvCache& cache, bool record_routing = false,
              bool device_code_path = false);

  StepLogits run(const SchedulerStep& step);

  // Pure decode steps replay CUDA graphs from now on (decode_graphs.h; the caller has
  // checked DecodeGraphs::unsupported_reason). scratch_block: a cache block no
  // sequence gets.
  void enable_decode_graphs(int64_t scratch_block, int64_t max_num_seqs);
  const DecodeGraphs* decode_graphs() const { return graphs_.get(); }

  QwenForCausalLM& model() { return model_; }

 private:
  QwenForCausalLM model_;
  KvCache& cache_;
  bool record_routing_ = false;
  bool device_code_path_ = false;
  std::unique_ptr<DecodeGraphs> graphs_;
};

}  // namespace aspen::rollout
