#include "aspen/rollout/generation_defaults.h"
#include "aspen/rollout/imports.h"

namespace aspen::rollout {

std::vector<TokenId> model_eos_token_ids(const ModelConfig& config,
                                         const std::optional<GenerationConfig>& generation) {
  std::vector<TokenId> ids;
  if (generation) {
    for (int64_t id : generation->eos_token_ids) ids.push_back(static_cast<TokenId>(id));
  }
  if (ids.empty() && config.eos_token_id >= 0) ids.push_back(static_cast<TokenId>(config.eos_token_id));
  return ids;
}

SamplingParams generation_defaults(const std::optional<GenerationConfig>& generation) {
  SamplingParams params;
  if (!generation) return params;
  if (generation->temperature) params.temperature = *generation->temperature;
  if (generation->top_p) params.top_p = *generation->top_p;
  if (generation->top_k) params.top_k = *generation->top_k;
  if (generation->do_sample && !*generation->do_sample) params.temperature = 0.0;
  return params;
}

}  // namespace aspen::rollout
