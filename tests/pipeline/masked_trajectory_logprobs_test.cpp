// The trainer's log-probs of a multi-turn trajectory's model tokens equal the rollout
// engine's (issue #35): two turns sampled by the engine around an observation that
// only conditions the second turn, trained as one masked response.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "aspen/model/weights_init.h"
#include "aspen/pipeline/imports.h"
#include "aspen/rollout/engine.h"
#include "aspen/train/actor.h"
#include "support/tiny_model_configs.h"

namespace aspen::pipeline {
namespace masked_trajectory_logprobs_test {

QwenForCausalLM engine_model() {
  QwenForCausalLM model = make_random_model(testing::tiny_rollout_config(), 3);
  init_weights(model, 3, /*initializer_range=*/0.5);  // peaked enough for varied tokens
  return model;
}

Completion sample(RolloutEngine& engine, const std::vector<TokenId>& prompt, int64_t tokens,
                  uint64_t seed) {
  GenerationRequest request;
  request.id = "turn" + std::to_string(seed);
  request.prompt = prompt;
  request.params.temperature = 1.0;
  request.params.max_tokens = tokens;
  request.params.seed = seed;
  engine.add_request(request);
  std::vector<Completion> done;
  while (engine.has_unfinished()) {
    for (auto& c : engine.step()) done.push_back(std::move(c));
  }
  EXPECT_EQ(done.size(), 1u);
  return done.at(0);
}

TEST(MaskedTrajectoryLogprobs, TrainerMatchesTheRolloutOnModelTokensAndSkipsObservations) {
  RolloutEngine engine(engine_model(), EngineConfig{});
  const std::vector<TokenId> prompt = {5, 12, 19, 26, 33, 40, 47};
  const Completion first = sample(engine, prompt, 6, 99);
  ASSERT_FALSE(first.token_ids.empty());
  const std::vector<TokenId> observation = {61, 62, 63, 64};  // a tool result, rendered
  std::vector<TokenId> context = prompt;
  context.insert(context.end(), first.token_ids.begin(), first.token_ids.end());
  context.insert(context.end(), observation.begin(), observation.end());
  const Completion second = sample(engine, context, 5, 100);
  ASSERT_FALSE(second.token_ids.empty());

  // One trajectory: turn 1, the observation (no rollout log-prob: 0), turn 2.
  train::TrainBatch batch;
  batch.prompts.emplace_back(prompt.begin(), prompt.end());
  std::vector<int64_t> response(first.token_ids.begin(), first.token_ids.end());
  response.insert(response.end(), observation.begin(), observation.end());
  response.insert(response.end(), second.token_ids.begin(), second.token_ids.end());
  batch.responses.push_back(response);
  std::vector<float> rollout(first.logprobs.begin(), first.logprobs.end());
  std::vector<float> mask(first.logprobs.size(), 1.0f);
  rollout.insert(rollout.end(), observation.size(), 0.0f);
  mask.insert(mask.end(), observation.size(), 0.0f);
  rollout.insert(rollout.end(), second.logprobs.begin(), second.logprobs.end());
  mask.insert(mask.end(), second.logprobs.size(), 1.0f);
  const torch::Tensor behaviour = torch::tensor(rollout);
  const torch::Tensor loss_mask = torch::tensor(mask);
  batch.token_columns[train::columns::kBehaviourLogprobs] = behaviour;
  batch.token_columns[train::columns::kOldLogprobs] = behaviour;
  batch.token_columns[train::columns::kAdvantages] = loss_mask;
  batch.token_columns[train::columns::kLossMask] = loss_mask;

  train::ActorTrainer actor(engine_model(), train::ActorOptions{});
  const torch::Tensor trainer = actor.compute_logprobs(batch).logprobs;
  const torch::Tensor model_tokens = loss_mask != 0;
  const torch::Tensor diff = (trainer - behaviour).abs().masked_select(model_tokens);
  EXPECT_LT(diff.max().item<double>(), 1e-4);  // the engine tests' tolerance
  // The observation's log-probs are real (they condition turn 2) but not the rollout's.
  EXPECT_GT((trainer - behaviour).abs().masked_select(~model_tokens).min().item<double>(), 1e-3);

  const train::ActorMetrics metrics = actor.update(batch, train::ActorUpdateOptions{});
  const int64_t model_count = static_cast<int64_t>(first.token_ids.size() + second.token_ids.size());
  EXPECT_EQ(metrics.rollout_logprob_diff_tokens, model_count);
  EXPECT_LT(metrics.rollout_logprob_diff_max, 1e-4);
  EXPECT_EQ(metrics.steps, 1);
}

}  // namespace masked_trajectory_logprobs_test
}  // namespace aspen::pipeline
