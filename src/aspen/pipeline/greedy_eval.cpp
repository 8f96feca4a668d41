#include "aspen/pipeline/greedy_eval.h"

#include <map>

#include "aspen/rollout/engine.h"

namespace aspen {

double greedy_accuracy(RlSetup& setup, const std::vector<TaskExample>& examples,
                       int64_t max_tokens) {
  torch::NoGradGuard no_grad;
  EngineConfig config;
  config.eos_token_ids = setup.eos_token_ids;
  config.kv_cache_bytes = 64LL << 20;
  config.max_num_seqs = 256;
  RolloutEngine engine(setup.model, config, setup.tokenizer);
  SamplingParams params;
  params.temperature = 0.0;
  params.max_tokens = max_tokens;
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < examples.size(); ++i) {
    GenerationRequest request;
    request.id = std::to_string(i);
    request.prompt = setup.tokenizer->encode(examples[i].prompt_text);
    request.params = params;
    requests.push_back(std::move(request));
  }
  const auto completions = engine.generate(std::move(requests));
  // One score_batch() per verifier (an external reward sees one batch).
  std::map<const Verifier*, std::vector<RewardInput>> inputs_by_verifier;
  for (const Completion& c : completions) {
    const TaskExample& example = examples[c.request_index];
    inputs_by_verifier[&verifier_for(setup, example)].push_back(
        RewardInput{example.prompt_text,
                    setup.tokenizer->decode(c.token_ids, /*skip_special_tokens=*/true),
                    example.ground_truth, {{"id", example.id}}});
  }
  int64_t correct = 0;
  for (const auto& [verifier, inputs] : inputs_by_verifier) {
    for (double score : verifier->score_batch(inputs)) correct += score >= 1.0 ? 1 : 0;
  }
  return examples.empty() ? 0.0
                          : static_cast<double>(correct) / static_cast<double>(examples.size());
}

}  // namespace aspen
