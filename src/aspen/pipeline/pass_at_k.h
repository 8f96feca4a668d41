// Sampled evaluation: n completions per example from a RolloutEngine on the policy as
// it is, scored by each example's verifier (verifier_for: built-in, command or
// weighted) in one batch per verifier; a sample is correct when it scores >= 1, as
// the training accuracy counts it.
//
// pass@k is the unbiased estimator of Chen et al. 2021 (HumanEval), averaged over
// examples: 1 - C(n - c, k) / C(n, k) for an example with c correct of n samples,
// computed as a product so that large n does not overflow. pass@1 = mean c / n.
// Reported for k = 1, 2, 4, ... up to n, and n itself.
// Greedy accuracy (the RL loop's eval before, during and after training, and aspen
// sft's) is the same evaluation with one greedy sample: pass@1 at temperature 0.
// Errors: aspen::Error for n < 1 or no examples. Thread safety: reads setup.model; the
// caller must not train it meanwhile.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/rollout/engine.h"
#include "aspen/rollout/sampling_params.h"

namespace aspen::pipeline {

struct PassAtKResult {
  int64_t examples = 0;
  int64_t samples_per_example = 0;
  double mean_score = 0.0;            // over every sample
  std::map<int64_t, double> pass_at;  // k -> pass@k
  std::vector<int64_t> correct;       // per example, in order
  int64_t response_tokens = 0;
};

// 1 - C(n - c, k) / C(n, k); aspen::Error unless 0 <= c <= n and 1 <= k <= n.
double pass_at_k(int64_t n, int64_t c, int64_t k);

// The engine an evaluation samples with: the policy's EOS, `kv_cache_bytes` of KV cache,
// up to 256 sequences at once.
EngineConfig evaluation_engine_config(const RlSetup& setup, int64_t kv_cache_bytes);

// pass@k for k = 1, 2, 4, ... and n, averaged over examples with `correct[e]` correct of
// n samples each; empty for no examples.
std::map<int64_t, double> mean_pass_at_ks(const std::vector<int64_t>& correct, int64_t n);

// Sample i of example e uses seed params.seed + e * n + i (or unseeded without one).
PassAtKResult evaluate_pass_at_k(RlSetup& setup, const std::vector<TaskExample>& examples,
                                 const SamplingParams& params, int64_t n,
                                 int64_t kv_cache_bytes = int64_t{256} << 20);

// The fraction of `examples` whose greedy (temperature 0) answer scores >= 1; 0 for
// none (a data-parallel rank's share may be empty).
double greedy_accuracy(RlSetup& setup, const std::vector<TaskExample>& examples,
                       int64_t max_tokens);

}  // namespace aspen::pipeline
