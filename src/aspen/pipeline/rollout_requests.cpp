#include "aspen/pipeline/rollout_requests.h"

#include <algorithm>

#include "aspen/pipeline/imports.h"
#include "aspen/rollout/kv_budget.h"

namespace aspen::pipeline {

EngineConfig rollout_engine_config(const TrainConfig& config, const RlSetup& setup) {
  EngineConfig engine;
  engine.kv_cache_bytes = config.rollout.kv_cache_mb << 20;
  engine.max_num_seqs = config.rollout.max_num_seqs;
  engine.max_num_batched_tokens = config.rollout.max_num_batched_tokens;
  engine.eos_token_ids = setup.eos_token_ids;
  engine.seed = config.train.seed;
  // The trainer compares its expert choices with these (router_topk_mismatch).
  engine.record_routed_experts = setup.model->config.is_moe();
  return engine;
}

int64_t rollout_kv_cache_bytes(const TrainConfig& config, const RlSetup& setup,
                               int64_t instances) {
  if (config.rollout.kv_cache_fraction == 0.0) return config.rollout.kv_cache_mb << 20;
  const int64_t all = kv_cache_bytes({0, config.rollout.kv_cache_fraction}, setup.rollout_device,
                                     "rollout.kv_cache_fraction");
  return all / std::max<int64_t>(1, instances);
}

bool in_long_tail(double fraction, int64_t group_id) {
  if (!(fraction > 0.0)) return false;
  // SplitMix64's finaliser of the group id, as a uniform double in [0, 1).
  uint64_t z = static_cast<uint64_t>(group_id) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
  return u < fraction;
}

SamplingParams rollout_sampling(const TrainConfig& config, int64_t group_id) {
  SamplingParams params;
  params.temperature = config.rollout.temperature;
  params.top_p = config.rollout.top_p;
  params.top_k = config.rollout.top_k;
  params.max_tokens = config.rollout.max_tokens;
  params.seed = config.train.seed * 1000003ULL + static_cast<uint64_t>(group_id);
  if (in_long_tail(config.rollout.long_tail_fraction, group_id)) {
    params.min_tokens = params.max_tokens;
  }
  return params;
}

GenerationRequest group_request(const TrainConfig& config, const RlSetup& setup,
                                const PromptGroup& group) {
  GenerationRequest request;
  request.id = std::to_string(group.group_id);
  request.prompt =
      setup.tokenizer->encode(setup.train_examples[static_cast<size_t>(group.example)].prompt_text);
  request.params = rollout_sampling(config, group.group_id);
  request.n = config.rollout.n;
  return request;
}

}  // namespace aspen::pipeline
