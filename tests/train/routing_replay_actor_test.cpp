// Routing replay (R3) through the actor: a Qwen3-MoE trainer whose router was perturbed
// after the rollout (so that its own top-k differs from the rollout's) routes every
// response token as the rollout did when algorithm.rollout_correction.routing_replay is
// on - in the old-log-prob forward and in the update's - and not without it.
#include <gtest/gtest.h>

#include "aspen/model/moe_routing.h"
#include "aspen/train/actor.h"
#include "aspen/train/batch_rows.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/policy_logprobs.h"
#include "aspen/util/error.h"
#include "train/train_fixtures.h"

namespace aspen::train {
namespace {

constexpr uint64_t kSeed = 5;

// The trainer's model: the rollout's with every router moved.
QwenForCausalLM perturbed_router_model() {
  QwenForCausalLM model = testing::tiny_moe_model(kSeed, torch::kDouble);
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  for (auto& item : model->named_parameters()) {
    if (item.key().find(".mlp.gate.weight") != std::string::npos) {
      item.value().add_(torch::randn_like(item.value()) * 20.0);
    }
  }
  return model;
}

// The rollout's expert choices for each response token: the routing of the position
// that sampled it ([R, S * k], as the engine records them), under the rollout's weights.
torch::Tensor rollout_routing(const TrainBatch& batch) {
  QwenForCausalLM rollout = testing::tiny_moe_model(kSeed, torch::kDouble);
  std::vector<int64_t> rows(static_cast<size_t>(batch.num_rows()));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int64_t>(i);
  const MicroBatch mb = pack_rows(batch, rows, torch::kCPU);
  MoeRoutingLog log;
  torch::NoGradGuard no_grad;
  response_logprobs(rollout, mb, LogprobHeadOptions{}, false, &log);
  std::vector<torch::Tensor> layers;
  for (const LayerRouting& layer : log.layers) {
    layers.push_back(layer.experts.index_select(0, mb.hidden_index));
  }
  return torch::cat(layers, 1).to(torch::kInt32);
}

TrainBatch replay_batch() {
  TrainBatch batch = testing::tiny_batch({{3, 6}, {2, 4}, {4, 5}, {1, 7}});
  const int64_t r = batch.num_response_tokens();
  batch.token_columns[columns::kBehaviourRoutedExperts] = rollout_routing(batch);
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  batch.token_columns[columns::kAdvantages] = torch::cos(torch::arange(r, options) * 0.9);
  return batch;
}

ActorMetrics update_with(TrainBatch batch, bool replay) {
  ActorOptions options;
  options.trainer.compute_dtype = torch::kDouble;
  options.trainer.optimizer.lr = 1e-2;
  ActorTrainer actor(perturbed_router_model(), options);
  // The old log-probs from the trainer's weights, with the same routing choice.
  batch.token_columns[columns::kOldLogprobs] =
      actor.compute_logprobs(batch, false, replay).logprobs;
  ActorUpdateOptions update;
  update.routing_replay = replay;
  return actor.update(batch, update);
}

TEST(RoutingReplayActor, WithReplayTheTrainerRoutesAsTheRolloutDidWithoutItNot) {
  const TrainBatch batch = replay_batch();
  const ActorMetrics own = update_with(batch, false);
  const ActorMetrics replayed = update_with(batch, true);
  const int64_t pairs = batch.token_columns.at(columns::kBehaviourRoutedExperts).size(0);
  EXPECT_EQ(own.router_topk_compared, pairs);  // one sparse layer
  EXPECT_GT(own.router_topk_mismatch, 0.2);    // the perturbation did change the routing
  EXPECT_EQ(replayed.router_topk_compared, pairs);
  EXPECT_EQ(replayed.router_topk_mismatch, 0.0);
  // The ratio new/old starts at exactly 1 in both (old from the same routing): the
  // replayed update is a proper PPO step, not one against another routing's log-probs.
  EXPECT_EQ(replayed.clip_frac, 0.0);
}

TEST(RoutingReplayActor, ReplayedLogprobsAreTheRolloutRoutingsNotTheTrainersOwn) {
  const TrainBatch batch = replay_batch();
  ActorOptions options;
  options.trainer.compute_dtype = torch::kDouble;
  ActorTrainer trainer(perturbed_router_model(), options);
  const torch::Tensor own = trainer.compute_logprobs(batch).logprobs;
  const torch::Tensor replayed = trainer.compute_logprobs(batch, false, true).logprobs;
  EXPECT_GT((own - replayed).abs().max().item<double>(), 1e-4);
  // The rollout's own weights replaying their own choice: exactly their plain forward.
  ActorTrainer rollout(testing::tiny_moe_model(kSeed, torch::kDouble), options);
  EXPECT_TRUE(rollout.compute_logprobs(batch, false, true).logprobs.equal(
      rollout.compute_logprobs(batch).logprobs));
  // The gate's gradient flows through the replayed experts' probabilities.
  TrainBatch update_batch = batch;
  update_batch.token_columns[columns::kOldLogprobs] = replayed - 0.1;
  ActorUpdateOptions update;
  update.routing_replay = true;
  const torch::Tensor gate_before =
      trainer.model()->named_parameters()["model.layers.0.mlp.gate.weight"].clone();
  trainer.update(update_batch, update);
  EXPECT_FALSE(trainer.model()->named_parameters()["model.layers.0.mlp.gate.weight"].equal(gate_before));
}

TEST(RoutingReplayActor, ReplayWithoutTheRolloutsChoicesNamesTheKey) {
  TrainBatch batch = replay_batch();
  batch.token_columns.erase(columns::kBehaviourRoutedExperts);
  ActorTrainer actor(perturbed_router_model(), ActorOptions{});
  try {
    actor.compute_logprobs(batch, false, true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("routing_replay"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aspen::train
