// Partial rollouts in the engine: cut_request() hands out unfinished samples with their
// output so far, and a request with resume_from continues one, on any engine.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "aspen/model/weights_init.h"
#include "aspen/rollout/engine.h"
#include "aspen/util/error.h"
#include "support/tiny_model_configs.h"

namespace aspen::rollout {
// Named: the tests are a unity build, and engine_test.cpp has helpers of these names.
namespace partial_rollout_test {

QwenForCausalLM tiny_model(uint64_t seed = 1) {
  QwenForCausalLM model = make_random_model(testing::tiny_rollout_config(), seed);
  init_weights(model, seed, /*initializer_range=*/0.5);  // greedy paths not all one token
  return model;
}

std::vector<TokenId> prompt_of(int64_t length, TokenId start) {
  std::vector<TokenId> prompt;
  for (int64_t i = 0; i < length; ++i) prompt.push_back((start + 7 * i) % 97);
  return prompt;
}

GenerationRequest sampled_request(int64_t max_tokens, int64_t n = 1) {
  GenerationRequest request;
  request.id = "r";
  request.prompt = prompt_of(7, 5);
  request.params.temperature = 1.0;
  request.params.max_tokens = max_tokens;
  request.params.seed = 99;
  request.n = n;
  return request;
}

GeneratedPrefix prefix_of(const Completion& cut) {
  GeneratedPrefix prefix;
  prefix.tokens = cut.token_ids;
  prefix.logprobs = cut.logprobs;
  prefix.policy_versions = cut.policy_versions;
  return prefix;
}

std::vector<Completion> run_to_end(RolloutEngine& engine) {
  std::vector<Completion> done;
  while (engine.has_unfinished()) {
    for (auto& c : engine.step()) done.push_back(std::move(c));
  }
  return done;
}

// Greedy continuation of `tokens` by recomputing the whole sequence each token, with
// each chosen token's log-probability: the reference for a resumed sample.
std::pair<std::vector<TokenId>, std::vector<float>> greedy_reference(QwenForCausalLM& model,
                                                                     std::vector<TokenId> tokens,
                                                                     int64_t steps) {
  torch::NoGradGuard no_grad;
  std::vector<TokenId> output;
  std::vector<float> logprobs;
  for (int64_t s = 0; s < steps; ++s) {
    const torch::Tensor input = torch::tensor(std::vector<int64_t>(tokens.begin(), tokens.end()));
    const torch::Tensor cu = torch::tensor({int64_t{0}, input.numel()}, torch::kInt64);
    const torch::Tensor logits =
        torch::matmul(model->forward(input, cu)[-1], model->lm_head_weight().t()).to(torch::kFloat);
    const auto next = static_cast<TokenId>(logits.argmax().item<int64_t>());
    logprobs.push_back(torch::log_softmax(logits, 0)[next].item<float>());
    output.push_back(next);
    tokens.push_back(next);
  }
  return {output, logprobs};
}

TEST(PartialRollout, ResumedSampleContinuesTheUncutSamplesSeedStream) {
  RolloutEngine uncut(tiny_model(), EngineConfig{});
  const Completion expected = uncut.generate({sampled_request(12)}).at(0);
  ASSERT_EQ(expected.token_ids.size(), 12u);

  RolloutEngine first(tiny_model(), EngineConfig{});
  first.add_request(sampled_request(12));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(first.step().empty());  // prefill + 4 decodes
  EXPECT_EQ(first.longest_output("r"), 5);
  const std::vector<Completion> cut = first.cut_request("r");
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0].finish_reason, FinishReason::kNone);
  EXPECT_EQ(cut[0].token_ids.size(), 5u);
  EXPECT_FALSE(first.has_unfinished());  // its blocks are free, nothing is left
  EXPECT_EQ(first.queue_state().free_blocks, first.queue_state().total_blocks);
  EXPECT_EQ(first.longest_output("r"), -1);

  // Another engine with the same weights continues it: the prompt and the given output
  // are kept exactly, the draws continue the seed stream, max_tokens counts the output.
  RolloutEngine second(tiny_model(), EngineConfig{});
  GenerationRequest resumed = sampled_request(12);
  resumed.resume_from = prefix_of(cut[0]);
  second.add_request(resumed);
  const std::vector<Completion> done = run_to_end(second);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].prompt_token_ids, expected.prompt_token_ids);
  EXPECT_EQ(done[0].token_ids, expected.token_ids);
  EXPECT_EQ(done[0].finish_reason, FinishReason::kLength);
  ASSERT_EQ(done[0].logprobs.size(), 12u);
  for (size_t t = 0; t < 5; ++t) EXPECT_EQ(done[0].logprobs[t], cut[0].logprobs[t]) << t;
  for (size_t t = 0; t < 12; ++t) EXPECT_NEAR(done[0].logprobs[t], expected.logprobs[t], 1e-4) << t;
  EXPECT_EQ(done[0].policy_versions, std::vector<int64_t>(12, 0));
  EXPECT_TRUE(std::isnan(done[0].sampling_logprobs[0]));  // not given: unknown
}

TEST(PartialRollout, ResumedUnderNewWeightsKeepsTheOutputAndContinuesOnThem) {
  RolloutEngine first(tiny_model(1), EngineConfig{});
  GenerationRequest greedy = sampled_request(10);
  greedy.params.temperature = 0.0;
  first.add_request(greedy);
  for (int i = 0; i < 4; ++i) first.step();
  const Completion cut = first.cut_request("r").at(0);
  ASSERT_EQ(cut.token_ids.size(), 4u);

  QwenForCausalLM next = tiny_model(2);
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, tensor] : next->hf_state()) weights[name] = tensor;
  RolloutEngine second(tiny_model(1), EngineConfig{});
  second.load_weights(1, weights);
  greedy.resume_from = prefix_of(cut);
  second.add_request(greedy);
  const Completion done = run_to_end(second).at(0);
  ASSERT_EQ(done.token_ids.size(), 10u);
  EXPECT_EQ(std::vector<TokenId>(done.token_ids.begin(), done.token_ids.begin() + 4),
            cut.token_ids);
  std::vector<TokenId> context = greedy.prompt;
  context.insert(context.end(), cut.token_ids.begin(), cut.token_ids.end());
  const auto [tail, tail_logprobs] = greedy_reference(next, context, 6);
  EXPECT_EQ(std::vector<TokenId>(done.token_ids.begin() + 4, done.token_ids.end()), tail);
  for (size_t t = 0; t < 6; ++t) EXPECT_NEAR(done.logprobs[4 + t], tail_logprobs[t], 1e-4) << t;
  const std::vector<int64_t> versions = {0, 0, 0, 0, 1, 1, 1, 1, 1, 1};
  EXPECT_EQ(done.policy_versions, versions);
}

TEST(PartialRollout, CutGroupReturnsEverySampleStillRunning) {
  RolloutEngine engine(tiny_model(), EngineConfig{});
  GenerationRequest group = sampled_request(20, 3);
  group.sample_indices = {4, 1, 6};
  engine.add_request(group);
  // Not prefilled yet: three samples with no output.
  const std::vector<Completion> unstarted = engine.cut_request("r");
  ASSERT_EQ(unstarted.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(unstarted[i].token_ids.empty());
    EXPECT_EQ(unstarted[i].prompt_token_ids, group.prompt);
  }
  EXPECT_EQ(unstarted[0].sample_index, 1);
  EXPECT_EQ(unstarted[1].sample_index, 4);
  EXPECT_EQ(unstarted[2].sample_index, 6);

  engine.add_request(group);
  for (int i = 0; i < 3; ++i) engine.step();
  const std::vector<Completion> cut = engine.cut_request("r");
  ASSERT_EQ(cut.size(), 3u);
  for (const Completion& c : cut) {
    EXPECT_EQ(c.token_ids.size(), 3u);
    EXPECT_EQ(c.logprobs.size(), 3u);
    EXPECT_EQ(c.policy_versions.size(), 3u);
  }
  EXPECT_TRUE(engine.cut_request("r").empty());
  EXPECT_FALSE(engine.has_unfinished());
}

TEST(PartialRollout, RejectsContinuationsThatCannotContinue) {
  RolloutEngine engine(tiny_model(), EngineConfig{});
  GeneratedPrefix prefix;
  prefix.tokens = {3, 4, 5};
  prefix.logprobs = {-1.0f, -1.0f, -1.0f};
  prefix.policy_versions = {0, 0, 0};
  GenerationRequest group = sampled_request(8, 2);
  group.resume_from = prefix;
  EXPECT_THROW(engine.add_request(group), Error);  // one sample only
  GenerationRequest full = sampled_request(3);
  full.resume_from = prefix;
  EXPECT_THROW(engine.add_request(full), Error);  // nothing left under max_tokens
  GenerationRequest ragged = sampled_request(8);
  ragged.resume_from = prefix;
  ragged.resume_from.policy_versions.pop_back();
  EXPECT_THROW(engine.add_request(ragged), Error);
  EXPECT_FALSE(engine.has_unfinished());
}

}  // namespace partial_rollout_test
}  // namespace aspen::rollout
