// Issue #38: a rollout instance applies LoRA's adapters UNMERGED (x W^T + s (x A^T) B^T,
// the stated choice) and receives them alone each version (RolloutEngine::load_weights
// with an adapter-only set). Its samples must be those of the merged model (the base
// with s B A added to every target, a plain model) within the sampler's tolerance:
// the same greedy tokens, log-probs within 1e-4 (fp32: the two orders of summation
// differ by rounding: 4-5e-6 here), and, sampling with a fixed seed, the same tokens
// (a seeded draw is a function of the logits, which differ only by that rounding).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "aspen/model/lora.h"
#include "aspen/model/weights_init.h"
#include "aspen/rollout/engine.h"
#include "support/tiny_model_configs.h"

namespace aspen::rollout {
namespace {

constexpr double kLogprobTolerance = 1e-4;

LoraOptions rank4_all_targets() {
  LoraOptions options;
  options.rank = 4;
  options.alpha = 8.0;
  return options;
}

QwenForCausalLM tiny_base(uint64_t seed) {
  // A larger init than HF's 0.02 so greedy paths are not all the same token.
  QwenForCausalLM model = make_random_model(testing::tiny_rollout_config(), seed);
  init_weights(model, seed, /*initializer_range=*/0.5);
  return model;
}

// The policy: the base with a trained (non-zero) adapter on all seven projections.
QwenForCausalLM trained_policy() {
  QwenForCausalLM model = tiny_base(3);
  torch::manual_seed(11);
  model->attach_lora(rank4_all_targets());
  torch::NoGradGuard no_grad;
  for (auto& [name, tensor] : model->lora_state()) {
    if (name.find(".lora_B.") != std::string::npos) tensor.normal_(0.0, 0.3);
  }
  return model;
}

std::map<std::string, torch::Tensor> cloned(
    const std::vector<std::pair<std::string, torch::Tensor>>& state) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, tensor] : state) out[name] = tensor.detach().clone();
  return out;
}

std::vector<GenerationRequest> requests(double temperature) {
  std::vector<GenerationRequest> out;
  for (int r = 0; r < 3; ++r) {
    GenerationRequest request;
    for (int t = 0; t < 6 + 3 * r; ++t) request.prompt.push_back((5 + 11 * r + 7 * t) % 97);
    request.params.temperature = temperature;
    request.params.max_tokens = 12;
    request.params.ignore_eos = true;
    request.params.seed = 100 + r;
    request.n = 2;
    out.push_back(std::move(request));
  }
  return out;
}

std::vector<Completion> generate(QwenForCausalLM model, std::vector<GenerationRequest> batch) {
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 64;
  RolloutEngine engine(std::move(model), config);
  return engine.generate(std::move(batch));
}

// An instance as an RL run starts one: the base with fresh adapters (B zero); the
// policy's adapters alone are published to it.
QwenForCausalLM instance_without_adapter_values() {
  QwenForCausalLM instance = tiny_base(3);
  torch::manual_seed(12);  // a different A: only the load can make it the policy's
  instance->attach_lora(rank4_all_targets());
  return instance;
}

// The merged model: a plain model (no adapters) holding merged_state().
QwenForCausalLM merged_model(const QwenForCausalLM& policy) {
  QwenForCausalLM merged = tiny_base(9);
  merged->load_state(cloned(policy->merged_state()), "merged policy");
  return merged;
}

double max_logprob_gap(const std::vector<Completion>& a, const std::vector<Completion>& b) {
  double gap = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t t = 0; t < std::min(a[i].logprobs.size(), b[i].logprobs.size()); ++t) {
      gap = std::max(gap, std::abs(static_cast<double>(a[i].logprobs[t]) - b[i].logprobs[t]));
    }
  }
  return gap;
}

void expect_same_samples(double temperature) {
  const QwenForCausalLM policy = trained_policy();
  QwenForCausalLM instance = instance_without_adapter_values();
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 64;
  RolloutEngine engine(instance, config);
  engine.load_weights(1, cloned(policy->lora_state()));  // adapter-only: the base untouched

  const std::vector<Completion> unmerged = engine.generate(requests(temperature));
  const std::vector<Completion> merged = generate(merged_model(policy), requests(temperature));
  QwenForCausalLM base = tiny_base(3);
  const std::vector<Completion> base_only = generate(base, requests(temperature));

  ASSERT_EQ(unmerged.size(), merged.size());
  for (size_t i = 0; i < unmerged.size(); ++i) {
    EXPECT_EQ(unmerged[i].token_ids, merged[i].token_ids) << "completion " << i;
    ASSERT_EQ(unmerged[i].logprobs.size(), merged[i].logprobs.size());
  }
  const double gap = max_logprob_gap(unmerged, merged);
  EXPECT_LT(gap, kLogprobTolerance);
  ::testing::Test::RecordProperty("max_logprob_gap", std::to_string(gap));
  // The adapter is not a no-op: without it the samples are different.
  bool any_differs = false;
  for (size_t i = 0; i < unmerged.size(); ++i) {
    any_differs = any_differs || unmerged[i].token_ids != base_only[i].token_ids;
  }
  EXPECT_TRUE(any_differs);
}

TEST(LoraRollout, UnmergedAdapterGreedySamplesEqualTheMergedModel) {
  expect_same_samples(/*temperature=*/0.0);
}

TEST(LoraRollout, UnmergedAdapterSeededSamplesEqualTheMergedModel) {
  expect_same_samples(/*temperature=*/1.0);
}

TEST(LoraRollout, AdapterOnlyWeightsLeaveTheBaseUntouched) {
  const QwenForCausalLM policy = trained_policy();
  QwenForCausalLM instance = instance_without_adapter_values();
  const std::map<std::string, torch::Tensor> base_before = cloned(instance->hf_state());
  EngineConfig config;
  config.num_blocks = 16;
  RolloutEngine engine(instance, config);
  engine.load_weights(7, cloned(policy->lora_state()));
  EXPECT_EQ(engine.policy_version(), 7);
  for (const auto& [name, tensor] : instance->hf_state()) {
    if (is_lora_parameter(name)) continue;  // compared below
    EXPECT_TRUE(torch::equal(tensor, base_before.at(name))) << name;
  }
  const std::map<std::string, torch::Tensor> policy_adapters = cloned(policy->lora_state());
  for (const auto& [name, tensor] : instance->lora_state()) {
    EXPECT_TRUE(torch::equal(tensor, policy_adapters.at(name))) << name;
  }
}

}  // namespace
}  // namespace aspen::rollout
