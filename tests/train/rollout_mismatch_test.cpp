// Training/inference mismatch metrics (ActorMetrics::rollout_logprob_diff_*): the
// |trainer - rollout| log-prob difference on the tokens of the first optimizer step,
// before it, against hand-made rollout log-probs; and the share of tokens a truncated
// importance-sampling correction capped.
#include <gtest/gtest.h>

#include "aspen/train/actor.h"
#include "aspen/train/batch_rows.h"
#include "train/train_fixtures.h"

namespace aspen::train {
namespace {

// Rows 0..3 with response lengths 4, 4, 2, 2; rollout log-probs = the trainer's
// + (0.1, -0.3, 0.1, -0.3, ...): mean |diff| 0.2, max 0.3 on every subset of rows.
TrainBatch batch_with_rollout(ActorTrainer& actor) {
  TrainBatch batch = testing::tiny_batch({{2, 4}, {3, 4}, {1, 2}, {2, 2}});
  const int64_t r = batch.num_response_tokens();
  const torch::Tensor current = actor.compute_logprobs(batch).logprobs;
  const torch::Tensor offsets =
      torch::where(torch::arange(r) % 2 == 0, torch::tensor(0.1, torch::kDouble),
                   torch::tensor(-0.3, torch::kDouble))
          .to(current.scalar_type());
  batch.token_columns[columns::kBehaviourLogprobs] = current + offsets;
  batch.token_columns[columns::kOldLogprobs] = current;
  batch.token_columns[columns::kAdvantages] = torch::cos(torch::arange(r, current.options()));
  return batch;
}

ActorOptions double_precision() {
  ActorOptions options;
  options.trainer.optimizer.lr = 1e-1;
  options.trainer.compute_dtype = torch::kDouble;
  return options;
}

TEST(RolloutMismatch, MeasuresTheDifferenceBeforeTheFirstStepOnly) {
  ActorTrainer actor(testing::tiny_model(5, torch::kDouble), double_precision());
  const TrainBatch batch = batch_with_rollout(actor);
  ActorUpdateOptions update;
  update.mini_batch_size = 2;  // two steps: rows {0, 1} then {2, 3}
  const ActorMetrics metrics = actor.update(batch, update);
  EXPECT_EQ(metrics.steps, 2);
  EXPECT_EQ(metrics.rollout_logprob_diff_tokens, 8);  // the first mini-batch's tokens
  EXPECT_NEAR(metrics.rollout_logprob_diff_mean, 0.2, 1e-9);
  EXPECT_NEAR(metrics.rollout_logprob_diff_max, 0.3, 1e-9);
  EXPECT_EQ(metrics.correction_capped_frac, 0.0);  // no correction configured
}

TEST(RolloutMismatch, EveryStreamedPartIsMeasured) {
  ActorTrainer actor(testing::tiny_model(5, torch::kDouble), double_precision());
  const TrainBatch batch = batch_with_rollout(actor);
  ActorUpdateOptions update;
  actor.accumulate(select_rows(batch, {0, 2}), update);
  actor.accumulate(select_rows(batch, {1, 3}), update);
  const ActorMetrics metrics = actor.step_accumulated(update);
  EXPECT_EQ(metrics.rollout_logprob_diff_tokens, 12);
  EXPECT_NEAR(metrics.rollout_logprob_diff_mean, 0.2, 1e-9);
  EXPECT_NEAR(metrics.rollout_logprob_diff_max, 0.3, 1e-9);
}

TEST(RolloutMismatch, WithoutRolloutLogprobsNothingIsMeasured) {
  ActorTrainer actor(testing::tiny_model(5, torch::kDouble), double_precision());
  TrainBatch batch = batch_with_rollout(actor);
  batch.token_columns.erase(columns::kBehaviourLogprobs);
  const ActorMetrics metrics = actor.update(batch, {});
  EXPECT_EQ(metrics.rollout_logprob_diff_tokens, 0);
  EXPECT_EQ(metrics.rollout_logprob_diff_mean, 0.0);
}

TEST(RolloutMismatch, TruncatedImportanceSamplingReportsTheCappedShare) {
  ActorTrainer actor(testing::tiny_model(5, torch::kDouble), double_precision());
  const TrainBatch batch = batch_with_rollout(actor);
  ActorUpdateOptions update;
  update.policy.correction = OffPolicyCorrection::kTruncatedIS;
  // Weight exp(old - behaviour) = exp(-0.1) ~ 0.905 or exp(0.3) ~ 1.35: a cap of 1.2
  // truncates exactly the tokens with offset -0.3, half of them.
  update.policy.correction_cap = 1.2;
  const ActorMetrics metrics = actor.update(batch, update);
  EXPECT_NEAR(metrics.correction_capped_frac, 0.5, 1e-9);
}

}  // namespace
}  // namespace aspen::train
