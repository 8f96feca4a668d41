// Greedy decoding of Aspen's rollout engine (paged KV cache, continuous batching)
// against HF transformers (tools/python/hf_reference.py: argmax over a full fp32
// recomputation of every prefix) on checkpoints transformers writes.
//
// Tokens are compared up to the first step where transformers' top-1 and top-2 logits
// are closer than kNearTie: there the argmax may legitimately follow rounding, and every
// later token depends on it. Up to that step the tokens must be equal and the engine's
// log-probs of them within 1e-4 of transformers'.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/model/pretrained.h"
#include "aspen/rollout/engine.h"
#include "support/hf_reference.h"

namespace aspen::rollout {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kNewTokens = 12;
constexpr double kNearTie = 1e-3;
constexpr double kTolerance = 1e-4;

struct HfModel {
  std::string name;
  json make;  // hf_reference.py make options
};

void PrintTo(const HfModel& model, std::ostream* out) {
  *out << model.name;
}

class TransformersGreedy : public ::testing::TestWithParam<HfModel> {};

TEST_P(TransformersGreedy, EngineGreedyTokensMatchTransformersUpToFirstNearTie) {
  const HfModel& param = GetParam();
  const std::string dir = ::testing::TempDir() + "/aspen_hf_greedy_" + param.name;
  fs::remove_all(dir);
  const std::string model_dir = dir + "/model";
  const auto prompts = testing::parity_prompts(300);
  std::vector<json> jobs = {testing::hf_make_job(model_dir, param.make)};
  for (const auto& prompt : prompts) {
    jobs.push_back(testing::hf_greedy_job(model_dir, prompt, kNewTokens));
  }
  const auto reference = testing::run_hf_reference(jobs, dir);
  ASSERT_TRUE(reference.ok(jobs.size())) << reference.errors;

  // All prompts in one engine, 4-token KV blocks: decoding crosses block boundaries
  // and shares steps between sequences of different lengths.
  EngineConfig config;
  config.block_size = 4;
  config.num_blocks = 64;
  RolloutEngine engine(load_pretrained_model(model_dir), config);
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationRequest request;
    request.id = std::to_string(i);
    request.prompt.assign(prompts[i].begin(), prompts[i].end());
    request.params.temperature = 0.0;
    request.params.max_tokens = kNewTokens;
    request.params.ignore_eos = true;  // the reference never stops early either
    requests.push_back(request);
  }
  torch::NoGradGuard no_grad;
  const std::vector<Completion> completions = engine.generate(requests);
  ASSERT_EQ(completions.size(), prompts.size());

  int64_t compared = 0;
  double max_logprob_diff = 0.0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json& want = reference.results[i + 1];
    const Completion& got = completions[i];
    ASSERT_EQ(got.token_ids.size(), static_cast<size_t>(kNewTokens)) << "prompt " << i;
    for (int64_t step = 0; step < kNewTokens; ++step) {
      if (want["margins"][step].get<double>() < kNearTie) break;
      ASSERT_EQ(got.token_ids[step], want["tokens"][step].get<int64_t>())
          << "prompt " << i << " step " << step;
      max_logprob_diff = std::max(
          max_logprob_diff, std::abs(got.logprobs[step] - want["logprobs"][step].get<double>()));
      ++compared;
    }
  }
  std::printf("%s: %lld of %lld greedy steps compared, max |log-prob diff| = %.3g\n",
              param.name.c_str(), static_cast<long long>(compared),
              static_cast<long long>(kNewTokens * prompts.size()), max_logprob_diff);
  // Near-ties are rare with these weights; most steps must have been checked.
  EXPECT_GE(compared, kNewTokens * static_cast<int64_t>(prompts.size()) / 2);
  EXPECT_LE(max_logprob_diff, kTolerance);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Models, TransformersGreedy,
    ::testing::Values(HfModel{"Qwen2Tied", {{"arch", "qwen2"}, {"tied", true}, {"seed", 41}}},
                      HfModel{"Qwen3Untied", {{"arch", "qwen3"}, {"tied", false}, {"seed", 42}}},
                      // Paged decode through the sparse MoE blocks (a dense layer 1).
                      HfModel{"Qwen3Moe",
                              {{"arch", "qwen3_moe"}, {"tied", false}, {"seed", 43},
                               {"layers", 3}, {"mlp_only_layers", "1"},
                               {"norm_topk_prob", true}}},
                      // DeepSeek-V3: paged decode over the latent cache (absorbed MLA),
                      // group-limited sigmoid routing, shared experts, dense layer 0.
                      HfModel{"DeepseekV3",
                              {{"arch", "deepseek_v3"}, {"tied", false}, {"seed", 44},
                               {"layers", 3}, {"norm_topk_prob", true}}}),
    [](const ::testing::TestParamInfo<HfModel>& info) { return info.param.name; });

}  // namespace
}  // namespace aspen::rollout
