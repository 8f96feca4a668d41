#include "aspen/pipeline/pass_at_k.h"

#include "aspen/pipeline/imports.h"
#include "aspen/rollout/engine.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {

double pass_at_k(int64_t n, int64_t c, int64_t k) {
  check_input(n >= 1 && c >= 0 && c <= n && k >= 1 && k <= n,
              "pass@" + std::to_string(k) + " with " + std::to_string(c) + " correct of " +
                  std::to_string(n),
              "pass@k");
  if (n - c < k) return 1.0;  // every k-subset holds a correct sample
  // C(n-c, k) / C(n, k) = prod_{i = n-c+1}^{n} (1 - k / i)
  double none_correct = 1.0;
  for (int64_t i = n - c + 1; i <= n; ++i) {
    none_correct *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  }
  return 1.0 - none_correct;
}

EngineConfig evaluation_engine_config(const RlSetup& setup, int64_t kv_cache_bytes) {
  EngineConfig config;
  config.eos_token_ids = setup.eos_token_ids;
  config.kv_cache_bytes = kv_cache_bytes;
  config.max_num_seqs = 256;
  return config;
}

std::map<int64_t, double> mean_pass_at_ks(const std::vector<int64_t>& correct, int64_t n) {
  std::map<int64_t, double> pass_at;
  if (correct.empty()) return pass_at;
  std::vector<int64_t> ks;
  for (int64_t k = 1; k <= n; k *= 2) ks.push_back(k);
  if (ks.back() != n) ks.push_back(n);
  for (int64_t k : ks) {
    double sum = 0.0;
    for (int64_t c : correct) sum += pass_at_k(n, c, k);
    pass_at[k] = sum / static_cast<double>(correct.size());
  }
  return pass_at;
}

PassAtKResult evaluate_pass_at_k(RlSetup& setup, const std::vector<TaskExample>& examples,
                                 const SamplingParams& params, int64_t n,
                                 int64_t kv_cache_bytes) {
  check_input(n >= 1, "n = " + std::to_string(n), "pass@k evaluation", "sample at least once");
  check_input(!examples.empty(), "no examples", "pass@k evaluation");
  torch::NoGradGuard no_grad;
  RolloutEngine engine(setup.model, evaluation_engine_config(setup, kv_cache_bytes),
                       setup.tokenizer);
  std::vector<GenerationRequest> requests;
  for (size_t e = 0; e < examples.size(); ++e) {
    const std::vector<TokenId> prompt = setup.tokenizer->encode(examples[e].prompt_text);
    for (int64_t i = 0; i < n; ++i) {
      GenerationRequest request;
      request.id = std::to_string(e) + ":" + std::to_string(i);
      request.prompt = prompt;
      request.params = params;
      if (params.seed) request.params.seed = *params.seed + e * static_cast<uint64_t>(n) + i;
      requests.push_back(std::move(request));
    }
  }
  const std::vector<Completion> completions = engine.generate(std::move(requests));

  PassAtKResult result;
  result.examples = static_cast<int64_t>(examples.size());
  result.samples_per_example = n;
  result.correct.assign(examples.size(), 0);
  // One score_batch() per verifier (an external reward sees one batch).
  std::map<const Verifier*, std::vector<size_t>> by_verifier;
  std::vector<RewardInput> inputs;
  for (size_t s = 0; s < completions.size(); ++s) {
    const Completion& c = completions[s];
    const TaskExample& example = examples[c.request_index / static_cast<size_t>(n)];
    inputs.push_back(RewardInput{example.prompt_text,
                                 setup.tokenizer->decode(c.token_ids, /*skip_special_tokens=*/true),
                                 example.ground_truth, {{"id", example.id}}});
    by_verifier[&verifier_for(setup, example)].push_back(s);
    result.response_tokens += static_cast<int64_t>(c.token_ids.size());
  }
  double score_sum = 0.0;
  for (const auto& [verifier, samples] : by_verifier) {
    std::vector<RewardInput> batch;
    for (size_t s : samples) batch.push_back(inputs[s]);
    const std::vector<double> scores = verifier->score_batch(batch);
    for (size_t k = 0; k < samples.size(); ++k) {
      score_sum += scores[k];
      const size_t example = completions[samples[k]].request_index / static_cast<size_t>(n);
      if (scores[k] >= 1.0) ++result.correct[example];
    }
  }
  result.mean_score = score_sum / static_cast<double>(completions.size());
  result.pass_at = mean_pass_at_ks(result.correct, n);
  return result;
}

double greedy_accuracy(RlSetup& setup, const std::vector<TaskExample>& examples,
                       int64_t max_tokens) {
  if (examples.empty()) return 0.0;
  SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.max_tokens = max_tokens;
  return evaluate_pass_at_k(setup, examples, greedy, /*n=*/1, /*kv_cache_bytes=*/int64_t{64} << 20)
      .pass_at.at(1);
}

}  // namespace aspen::pipeline
