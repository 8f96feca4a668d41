// The loss mask in the trainers (issue #35): a multi-turn trajectory's environment
// tokens condition the model tokens after them but never train - whatever their
// columns hold, the update is bit-identical; trailing observations change nothing
// against the batch without them (denominators count model tokens only); the
// rollout mismatch compares model tokens only.
#include <gtest/gtest.h>

#include <limits>

#include "aspen/train/actor.h"
#include "aspen/train/critic.h"
#include "aspen/train/micro_batches.h"
#include "aspen/util/error.h"
#include "train/train_fixtures.h"

namespace aspen::train {
namespace {

// Response layouts of a two-turn trajectory per row: (model, env, model) token counts.
struct Turns {
  int prompt, first, observation, second;
};
const std::vector<Turns> kTurns = {{3, 3, 2, 2}, {2, 2, 3, 1}, {4, 4, 0, 0}, {1, 2, 2, 3},
                                   {5, 1, 1, 1}, {2, 3, 2, 0}};

torch::Tensor loss_mask_of(const std::vector<Turns>& turns) {
  std::vector<double> mask;
  for (const Turns& t : turns) {
    mask.insert(mask.end(), static_cast<size_t>(t.first), 1.0);
    mask.insert(mask.end(), static_cast<size_t>(t.observation), 0.0);
    mask.insert(mask.end(), static_cast<size_t>(t.second), 1.0);
  }
  return torch::tensor(mask, torch::kDouble);
}

TrainBatch multi_turn_batch(ActorTrainer& actor, const std::vector<Turns>& turns = kTurns) {
  std::vector<std::pair<int, int>> lengths;
  for (const Turns& t : turns) lengths.push_back({t.prompt, t.first + t.observation + t.second});
  TrainBatch batch = testing::tiny_batch(lengths);
  const int64_t r = batch.num_response_tokens();
  const torch::Tensor current = actor.compute_logprobs(batch).logprobs;
  const torch::Tensor wave = torch::arange(r, current.options());
  batch.token_columns[columns::kOldLogprobs] = current + 0.3 * torch::sin(wave * 1.7);
  batch.token_columns[columns::kRefLogprobs] = current + 0.2 * torch::cos(wave);
  batch.token_columns[columns::kBehaviourLogprobs] = current - 0.1 * torch::sin(wave * 0.7);
  batch.token_columns[columns::kAdvantages] = torch::cos(wave * 0.9);
  batch.token_columns[columns::kLossMask] = loss_mask_of(turns).to(current.scalar_type());
  return batch;
}

// `batch` with every token column but the mask set to `garbage` at environment tokens.
TrainBatch spoiled(TrainBatch batch, double garbage) {
  const torch::Tensor env = batch.token_columns.at(columns::kLossMask) == 0;
  for (auto& [name, column] : batch.token_columns) {
    if (name == columns::kLossMask) continue;
    column = column.masked_fill(env, garbage);
  }
  return batch;
}

ActorOptions double_actor(int64_t micro_batch_tokens = 1 << 20) {
  ActorOptions options;
  options.trainer.optimizer.lr = 1e-2;
  options.trainer.compute_dtype = torch::kDouble;
  options.trainer.max_tokens_per_micro_batch = micro_batch_tokens;
  return options;
}

// DAPO-like: clip-higher, dual clip, token-level TIS against the rollout, KL and entropy.
ActorUpdateOptions every_term(AggMode mode) {
  ActorUpdateOptions update;
  update.policy.agg.mode = mode;
  update.policy.clip_ratio_high = 0.28;
  update.policy.clip_ratio_c = 3.0;
  update.policy.correction = OffPolicyCorrection::kTruncatedIS;
  update.policy.correction_cap = 1.1;
  update.kl_coef = 0.1;
  update.entropy_coef = 0.01;
  update.mini_batch_size = 4;  // two optimizer steps, the second on the rows left
  return update;
}

class ActorLossMask : public ::testing::TestWithParam<AggMode> {};

TEST_P(ActorLossMask, GarbageAtEnvironmentTokensLeavesTheUpdateBitIdentical) {
  ActorTrainer clean(testing::tiny_model(7, torch::kDouble), double_actor(14));
  ActorTrainer dirty(testing::tiny_model(7, torch::kDouble), double_actor(14));
  const TrainBatch batch = multi_turn_batch(clean);
  const ActorMetrics a = clean.update(batch, every_term(GetParam()));
  const ActorMetrics b = dirty.update(spoiled(batch, std::numeric_limits<double>::quiet_NaN()),
                                      every_term(GetParam()));
  EXPECT_EQ(a.steps, 2);
  EXPECT_GE(a.micro_batches, 4);
  EXPECT_EQ(testing::max_param_diff(*clean.model(), *dirty.model()), 0.0);
  EXPECT_GT(testing::max_param_diff(*clean.model(), *testing::tiny_model(7, torch::kDouble)),
            1e-4);  // the update did move the weights
  EXPECT_EQ(a.policy_loss, b.policy_loss);
  EXPECT_EQ(a.kl_loss, b.kl_loss);
  EXPECT_EQ(a.grad_norm, b.grad_norm);
  EXPECT_EQ(a.clip_frac, b.clip_frac);
  EXPECT_EQ(a.entropy, b.entropy);
  EXPECT_EQ(a.correction_capped_frac, b.correction_capped_frac);
  EXPECT_EQ(a.rollout_logprob_diff_mean, b.rollout_logprob_diff_mean);
  EXPECT_TRUE(std::isfinite(a.policy_loss));
}

// Observations after a row's last model turn condition nothing that trains, so a batch
// ending its rows with masked observations must update exactly like the batch without
// them - which holds only if every denominator (token-mean's N, seq-mean-token-mean's
// L_b, the micro-batch metric weights) counts model tokens.
TEST_P(ActorLossMask, TrailingObservationsUpdateLikeTheBatchWithoutThem) {
  const std::vector<Turns> with_trailing = {{3, 3, 2, 0}, {2, 2, 3, 0}, {4, 4, 1, 0},
                                            {1, 2, 2, 0}, {5, 1, 1, 0}};
  ActorTrainer masked(testing::tiny_model(7, torch::kDouble), double_actor(9));
  ActorTrainer truncated(testing::tiny_model(7, torch::kDouble), double_actor(9));
  const TrainBatch long_batch = multi_turn_batch(masked, with_trailing);
  // The same rows cut after their model tokens, with the model tokens' columns.
  TrainBatch short_batch;
  short_batch.prompts = long_batch.prompts;
  for (size_t row = 0; row < with_trailing.size(); ++row) {
    const std::vector<int64_t>& response = long_batch.responses[row];
    short_batch.responses.emplace_back(response.begin(), response.begin() + with_trailing[row].first);
  }
  const torch::Tensor model = long_batch.token_columns.at(columns::kLossMask) != 0;
  for (const auto& [name, column] : long_batch.token_columns) {
    if (name != columns::kLossMask) short_batch.token_columns[name] = column.masked_select(model);
  }
  ActorUpdateOptions update = every_term(GetParam());
  const ActorMetrics a = masked.update(long_batch, update);
  const ActorMetrics b = truncated.update(short_batch, update);
  EXPECT_EQ(a.steps, 2);
  EXPECT_NEAR(a.policy_loss, b.policy_loss, 1e-12);
  EXPECT_NEAR(a.kl_loss, b.kl_loss, 1e-12);
  EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-12);
  EXPECT_NEAR(a.clip_frac, b.clip_frac, 1e-12);
  EXPECT_NEAR(a.entropy, b.entropy, 1e-12);
  EXPECT_NEAR(a.correction_capped_frac, b.correction_capped_frac, 1e-12);
  EXPECT_EQ(a.rollout_logprob_diff_tokens, b.rollout_logprob_diff_tokens);
  EXPECT_LT(testing::max_param_diff(*masked.model(), *truncated.model()), 1e-12);
}

// Streaming accumulation divides by the model tokens of everything accumulated.
TEST_P(ActorLossMask, StreamedPartsEqualOneUpdateWithAMask) {
  ActorTrainer whole(testing::tiny_model(7, torch::kDouble), double_actor());
  ActorTrainer streamed(testing::tiny_model(7, torch::kDouble), double_actor());
  const TrainBatch batch = multi_turn_batch(whole);
  ActorUpdateOptions update = every_term(GetParam());
  update.mini_batch_size = 0;
  const ActorMetrics a = whole.update(batch, update);
  TrainBatch first, second;
  const std::vector<int64_t> offsets = batch.response_offsets();
  for (TrainBatch* part : {&first, &second}) {
    const int64_t begin = part == &first ? 0 : 3, end = part == &first ? 3 : 6;
    for (int64_t row = begin; row < end; ++row) {
      part->prompts.push_back(batch.prompts[row]);
      part->responses.push_back(batch.responses[row]);
    }
    for (const auto& [name, column] : batch.token_columns) {
      part->token_columns[name] = column.slice(0, offsets[begin], offsets[end]);
    }
    streamed.accumulate(*part, update);
  }
  const ActorMetrics b = streamed.step_accumulated(update);
  EXPECT_NEAR(a.policy_loss, b.policy_loss, 1e-12);
  EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-12);
  EXPECT_NEAR(a.clip_frac, b.clip_frac, 1e-12);
  EXPECT_LT(testing::max_param_diff(*whole.model(), *streamed.model()), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(AggModes, ActorLossMask,
                         ::testing::Values(AggMode::kTokenMean, AggMode::kSeqMeanTokenMean,
                                           AggMode::kSeqMeanTokenSum));

// The trainer's log-probs of model tokens against the rollout's: environment tokens
// carry no rollout log-prob (0 here, as a trajectory stores them) and are not compared.
TEST(ActorLossMaskMismatch, ComparesModelTokensOnly) {
  ActorTrainer actor(testing::tiny_model(3, torch::kDouble), double_actor());
  TrainBatch batch = multi_turn_batch(actor);
  const torch::Tensor current = actor.compute_logprobs(batch).logprobs;
  const torch::Tensor model = batch.token_columns.at(columns::kLossMask) != 0;
  batch.token_columns[columns::kBehaviourLogprobs] =
      torch::where(model, current + 0.25, torch::zeros_like(current));
  ActorUpdateOptions update;
  const ActorMetrics metrics = actor.update(batch, update);
  EXPECT_EQ(metrics.rollout_logprob_diff_tokens, model.sum().item<int64_t>());
  EXPECT_EQ(batch.num_loss_tokens(), metrics.rollout_logprob_diff_tokens);
  EXPECT_NEAR(metrics.rollout_logprob_diff_mean, 0.25, 1e-9);
  EXPECT_NEAR(metrics.rollout_logprob_diff_max, 0.25, 1e-9);
}

TEST(ActorLossMaskMismatch, MalformedMasksAreErrors) {
  ActorTrainer actor(testing::tiny_model(3, torch::kDouble), double_actor());
  TrainBatch batch = multi_turn_batch(actor);
  batch.token_columns[columns::kLossMask][0] = 0.5;
  EXPECT_THROW(actor.update(batch, ActorUpdateOptions{}), Error);
}

TEST(CriticLossMask, GarbageAtEnvironmentTokensLeavesTheUpdateBitIdentical) {
  TrainerOptions options;
  options.optimizer.lr = 1e-2;
  options.compute_dtype = torch::kDouble;
  options.max_tokens_per_micro_batch = 14;
  CriticTrainer clean(critic_from_policy(testing::tiny_model(5, torch::kDouble)), options);
  CriticTrainer dirty(critic_from_policy(testing::tiny_model(5, torch::kDouble)), options);
  ActorTrainer actor(testing::tiny_model(5, torch::kDouble), double_actor());
  TrainBatch batch = multi_turn_batch(actor);
  const int64_t r = batch.num_response_tokens();
  batch.token_columns[columns::kValues] = clean.compute_values(batch);
  batch.token_columns[columns::kReturns] = torch::sin(torch::arange(r, torch::kDouble));
  CriticUpdateOptions update;
  update.mini_batch_size = 4;
  const CriticMetrics a = clean.update(batch, update);
  const CriticMetrics b = dirty.update(spoiled(batch, 1e30), update);
  EXPECT_EQ(a.steps, 2);
  EXPECT_EQ(a.value_loss, b.value_loss);
  EXPECT_EQ(a.grad_norm, b.grad_norm);
  EXPECT_EQ(testing::max_param_diff(*clean.model(), *dirty.model()), 0.0);
  EXPECT_GT(a.value_loss, 0.0);
}

TEST(MicroBatchLossMask, CountsModelTokensAndCarriesTheMask) {
  ActorTrainer actor(testing::tiny_model(3, torch::kDouble), double_actor());
  const TrainBatch batch = multi_turn_batch(actor);
  const MicroBatch mb = pack_rows(batch, {1, 3}, torch::kCPU);
  EXPECT_EQ(mb.num_response_tokens, 6 + 7);
  EXPECT_EQ(mb.num_loss_tokens, 3 + 5);
  const PackedSeqs packed = response_packing(mb);
  ASSERT_TRUE(packed.has_loss_mask());
  EXPECT_EQ(packed.num_loss_tokens(), 8);
  batch.validate();
}

}  // namespace
}  // namespace aspen::train
