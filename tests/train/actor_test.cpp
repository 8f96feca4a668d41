// ActorTrainer: gradient accumulation is exact, a PPO step moves log-probs the way
// the advantages say, and the reference policy stays frozen.
#include "aspen/train/actor.h"

#include <gtest/gtest.h>

#include "aspen/model/moe_routing.h"
#include "aspen/train/batch_rows.h"
#include "aspen/train/micro_batches.h"
#include "aspen/train/policy_logprobs.h"
#include "aspen/train/reference.h"
#include "aspen/util/error.h"
#include "train/train_fixtures.h"

namespace aspen::train {
namespace {

TrainBatch rl_batch(ActorTrainer& actor) {
  TrainBatch batch = testing::tiny_batch({{3, 6}, {2, 4}, {4, 5}, {1, 7}, {5, 3}, {2, 2}});
  const int64_t r = batch.num_response_tokens();
  const torch::Tensor old = actor.compute_logprobs(batch).logprobs;
  // Old log-probs a little off the current ones so that some tokens clip.
  batch.token_columns[columns::kOldLogprobs] =
      old + 0.3 * torch::sin(torch::arange(r, old.options()) * 1.7);
  batch.token_columns[columns::kRefLogprobs] =
      old + 0.2 * torch::cos(torch::arange(r, old.options()));
  batch.token_columns[columns::kAdvantages] = torch::cos(torch::arange(r, old.options()) * 0.9);
  return batch;
}

class GradientAccumulation : public ::testing::TestWithParam<AggMode> {};

TEST_P(GradientAccumulation, ManyMicroBatchesEqualOneBigMicroBatch) {
  ActorOptions one_options;
  one_options.trainer.optimizer.lr = 1e-2;
  one_options.trainer.max_tokens_per_micro_batch = 1 << 20;
  one_options.trainer.compute_dtype = torch::kDouble;
  ActorOptions many_options = one_options;
  many_options.trainer.max_tokens_per_micro_batch = 12;
  ActorTrainer one(testing::tiny_model(7, torch::kDouble), one_options);
  ActorTrainer many(testing::tiny_model(7, torch::kDouble), many_options);
  const TrainBatch batch = rl_batch(one);

  ActorUpdateOptions update;
  update.policy.agg.mode = GetParam();
  update.kl_coef = 0.1;
  update.entropy_coef = 0.01;
  const ActorMetrics m_one = one.update(batch, update);
  const ActorMetrics m_many = many.update(batch, update);
  EXPECT_EQ(m_one.micro_batches, 1);
  EXPECT_GE(m_many.micro_batches, 4);
  EXPECT_EQ(m_one.steps, 1);
  EXPECT_GT(m_one.clip_frac, 0.0);
  EXPECT_NEAR(m_one.policy_loss, m_many.policy_loss, 1e-9);
  EXPECT_NEAR(m_one.grad_norm, m_many.grad_norm, 1e-9);
  EXPECT_NEAR(m_one.clip_frac, m_many.clip_frac, 1e-9);
  EXPECT_NEAR(m_one.entropy, m_many.entropy, 1e-9);
  EXPECT_LT(testing::max_param_diff(*one.model(), *many.model()), 1e-6);
  EXPECT_GT(testing::max_param_diff(*one.model(), *testing::tiny_model(7, torch::kDouble)),
            1e-4);  // the update did move the weights
}

INSTANTIATE_TEST_SUITE_P(AggModes, GradientAccumulation,
                         ::testing::Values(AggMode::kTokenMean, AggMode::kSeqMeanTokenMean));

// Streaming (the async pipeline trains groups as they arrive): parts accumulated as
// sums and divided at the step equal one update of the whole batch.
class StreamingAccumulation : public ::testing::TestWithParam<AggMode> {};

TEST_P(StreamingAccumulation, PartsAccumulatedOverTimeEqualOneUpdate) {
  ActorOptions options;
  options.trainer.optimizer.lr = 1e-2;
  options.trainer.compute_dtype = torch::kDouble;
  options.trainer.optimizer.max_grad_norm = 0.5;  // clipping acts on the divided gradient
  ActorTrainer whole(testing::tiny_model(7, torch::kDouble), options);
  ActorTrainer streamed(testing::tiny_model(7, torch::kDouble), options);
  const TrainBatch batch = rl_batch(whole);

  ActorUpdateOptions update;
  update.policy.agg.mode = GetParam();
  update.kl_coef = 0.1;
  update.entropy_coef = 0.01;
  const ActorMetrics want = whole.update(batch, update);
  for (const std::vector<int64_t>& rows :
       std::vector<std::vector<int64_t>>{{0, 1}, {2}, {3, 4, 5}}) {
    streamed.accumulate(select_rows(batch, rows), update);
  }
  const ActorMetrics got = streamed.step_accumulated(update);
  EXPECT_EQ(got.steps, 1);
  EXPECT_GT(want.grad_norm, 0.5);
  EXPECT_NEAR(got.grad_norm, want.grad_norm, 1e-9);
  EXPECT_NEAR(got.policy_loss, want.policy_loss, 1e-9);
  EXPECT_NEAR(got.kl_loss, want.kl_loss, 1e-9);
  EXPECT_NEAR(got.clip_frac, want.clip_frac, 1e-9);
  EXPECT_NEAR(got.entropy, want.entropy, 1e-9);
  EXPECT_NEAR(got.approx_kl, want.approx_kl, 1e-9);
  EXPECT_LT(testing::max_param_diff(*whole.model(), *streamed.model()), 1e-9);
  // Nothing accumulated since: no step.
  EXPECT_EQ(streamed.step_accumulated(update).steps, 0);
}

INSTANTIATE_TEST_SUITE_P(AggModes, StreamingAccumulation,
                         ::testing::Values(AggMode::kTokenMean, AggMode::kSeqMeanTokenMean,
                                           AggMode::kSeqMeanTokenSum));

// MoE: the update reports the load-balancing loss of its forward and, with a
// coefficient, trains it - the router moves differently, the head (which the aux
// loss does not reach) exactly as without it.
TEST(ActorTrainer, MoeRouterAuxLossIsReportedAndTrainedOnlyWithItsCoefficient) {
  ActorOptions options;
  options.trainer.optimizer.lr = 1e-2;
  options.trainer.optimizer.max_grad_norm = 0.0;  // clipping would couple every parameter
  options.trainer.compute_dtype = torch::kDouble;
  options.trainer.max_tokens_per_micro_batch = 1 << 20;  // one micro-batch: share 1
  ActorTrainer plain(testing::tiny_moe_model(7, torch::kDouble), options);
  ActorTrainer balanced(testing::tiny_moe_model(7, torch::kDouble), options);
  const TrainBatch batch = rl_batch(plain);

  // The loss the update should report: one forward of the whole batch, before the step.
  const MicroBatch mb = pack_rows(batch, {0, 1, 2, 3, 4, 5}, torch::kCPU);
  MoeRoutingLog routing;
  {
    torch::NoGradGuard no_grad;
    response_logprobs(plain.compute_model(), mb, LogprobHeadOptions{}, false, &routing);
  }
  const double want = load_balancing_loss(routing).item<double>();
  EXPECT_GT(want, 0.0);

  ActorUpdateOptions update;
  const ActorMetrics without = plain.update(batch, update);
  update.router_aux_loss_coef = 0.5;
  const ActorMetrics with = balanced.update(batch, update);
  EXPECT_NEAR(without.router_aux_loss, want, 1e-12);
  EXPECT_NEAR(with.router_aux_loss, want, 1e-12);
  // The load of the one sparse layer: busiest expert over the mean, from the same forward.
  const torch::Tensor load = routing.layers.at(0).assignments;
  const double imbalance = (load.max() / load.mean()).item<double>();
  EXPECT_GE(imbalance, 1.0);
  EXPECT_NEAR(without.router_load_max, imbalance, 1e-12);
  EXPECT_NEAR(without.router_load_mean, imbalance, 1e-12);

  auto param = [](ActorTrainer& actor, const std::string& name) {
    return actor.model()->named_parameters()[name].detach();
  };
  const std::string router = "model.layers.0.mlp.gate.weight";
  EXPECT_GT((param(plain, router) - param(balanced, router)).abs().max().item<double>(), 1e-6);
  EXPECT_LT((param(plain, "lm_head.weight") - param(balanced, "lm_head.weight"))
                .abs()
                .max()
                .item<double>(),
            1e-12);
}

// MoE: with the rollout's expert choices in the batch, the update reports the share
// of (response token, sparse layer) pairs whose top-k set the trainer's forward
// chose differently - order within the set does not count, one changed choice does.
TEST(ActorTrainer, MoeReportsTheShareOfTokensRoutedOtherwiseThanInTheRollout) {
  ActorOptions options;
  options.trainer.compute_dtype = torch::kDouble;
  options.trainer.max_tokens_per_micro_batch = 12;  // several micro-batches
  ActorTrainer actor(testing::tiny_moe_model(5, torch::kDouble), options);
  TrainBatch batch = rl_batch(actor);
  const int64_t r = batch.num_response_tokens();

  // The trainer's own routing of every response token (one sparse layer, top-2).
  const MicroBatch mb = pack_rows(batch, {0, 1, 2, 3, 4, 5}, torch::kCPU);
  MoeRoutingLog routing;
  {
    torch::NoGradGuard no_grad;
    response_logprobs(actor.compute_model(), mb, LogprobHeadOptions{}, false, &routing);
  }
  ASSERT_EQ(routing.layers.size(), 1u);
  const torch::Tensor chosen = routing.layers[0].experts.index_select(0, mb.hidden_index);
  ASSERT_EQ(chosen.size(0), r);

  // Each update from the same weights (an update moves them).
  const auto measure = [&](const TrainBatch& with) {
    ActorTrainer fresh(testing::tiny_moe_model(5, torch::kDouble), options);
    return fresh.update(with, ActorUpdateOptions{});
  };
  // Same sets, listed in the other order: no mismatch.
  batch.token_columns[columns::kBehaviourRoutedExperts] = chosen.flip(-1).to(torch::kInt32);
  const ActorMetrics same = measure(batch);
  EXPECT_EQ(same.router_topk_compared, r);
  EXPECT_EQ(same.router_topk_mismatch, 0.0);

  // Three tokens whose rollout picked another expert in the second slot.
  torch::Tensor changed = chosen.clone();
  for (int64_t row : {0, 5, 9}) {
    const int64_t first = changed[row][0].item<int64_t>(), second = changed[row][1].item<int64_t>();
    int64_t other = 0;
    while (other == first || other == second) ++other;
    changed[row][1] = other;
  }
  batch.token_columns[columns::kBehaviourRoutedExperts] = changed.to(torch::kInt32);
  const ActorMetrics differ = measure(batch);
  EXPECT_EQ(differ.router_topk_compared, r);
  EXPECT_DOUBLE_EQ(differ.router_topk_mismatch, 3.0 / static_cast<double>(r));

  // Without the column: nothing compared.
  batch.token_columns.erase(columns::kBehaviourRoutedExperts);
  EXPECT_EQ(measure(batch).router_topk_compared, 0);
}

TEST(ActorTrainer, StreamingRefusesMoreThanOneStep) {
  ActorTrainer actor(testing::tiny_model(3), {});
  TrainBatch batch = rl_batch(actor);
  ActorUpdateOptions update;
  update.mini_batch_size = 2;
  EXPECT_THROW(actor.accumulate(batch, update), Error);
  update.mini_batch_size = 0;
  update.epochs = 2;
  EXPECT_THROW(actor.accumulate(batch, update), Error);
}

TEST(ActorTrainer, PpoUpdateFollowsTheSignOfTheAdvantages) {
  ActorOptions options;
  options.trainer.optimizer.lr = 5e-3;
  ActorTrainer actor(testing::tiny_model(11), options);
  TrainBatch batch = testing::tiny_batch({{2, 5}, {3, 4}, {2, 6}, {3, 5}});
  const torch::Tensor before = actor.compute_logprobs(batch).logprobs;
  const std::vector<int64_t> offsets = batch.response_offsets();
  // Rows 0-1 good (A = +1), rows 2-3 bad (A = -1).
  torch::Tensor advantages = torch::ones_like(before);
  advantages.slice(0, offsets[2]).fill_(-1.0);
  batch.token_columns[columns::kOldLogprobs] = before;
  batch.token_columns[columns::kAdvantages] = advantages;
  ActorUpdateOptions update;
  update.mini_batch_size = 2;
  update.epochs = 2;
  update.shuffle = true;
  const ActorMetrics metrics = actor.update(batch, update);
  EXPECT_EQ(metrics.steps, 4);
  const torch::Tensor after = actor.compute_logprobs(batch).logprobs;
  const torch::Tensor delta = after - before;
  EXPECT_GT(delta.slice(0, 0, offsets[2]).mean().item<double>(), 0.0);
  EXPECT_LT(delta.slice(0, offsets[2]).mean().item<double>(), 0.0);
  EXPECT_GT((delta * advantages).gt(0).to(torch::kFloat).mean().item<double>(), 0.7);
}

// Decoupled PPO's proximal policy, for a single optimizer step, is the current policy:
// taking it from the update's own forward pass gives the same step as recomputing it.
TEST(ActorTrainer, ProximalFromTheUpdatesForwardEqualsARecomputedOne) {
  ActorOptions options;
  options.trainer.optimizer.lr = 5e-3;
  ActorTrainer recomputed(testing::tiny_model(13), options);
  ActorTrainer in_pass(testing::tiny_model(13), options);
  TrainBatch batch = testing::tiny_batch({{2, 5}, {3, 4}, {2, 6}});
  const torch::Tensor current = recomputed.compute_logprobs(batch).logprobs;
  batch.token_columns[columns::kAdvantages] = torch::linspace(-1.0, 1.0, current.size(0));
  batch.token_columns[columns::kBehaviourLogprobs] = current - 0.1;  // an older policy
  ActorUpdateOptions update;
  update.policy.correction = OffPolicyCorrection::kDecoupled;
  TrainBatch with_old = batch;
  with_old.token_columns[columns::kOldLogprobs] = current;
  const ActorMetrics a = recomputed.update(with_old, update);
  update.proximal_is_current = true;
  const ActorMetrics b = in_pass.update(batch, update);  // no old_logprobs column at all
  EXPECT_NEAR(a.policy_loss, b.policy_loss, 1e-6);
  EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5);
  EXPECT_LT(testing::max_param_diff(*recomputed.model(), *in_pass.model()), 1e-6);
  update.epochs = 2;
  EXPECT_THROW(in_pass.update(batch, update), Error);  // more than one step: refused
}

TEST(ActorTrainer, MissingColumnsAreErrors) {
  ActorTrainer actor(testing::tiny_model(1), {});
  TrainBatch batch = testing::tiny_batch({{2, 3}});
  EXPECT_THROW(actor.update(batch, {}), Error);
  batch.token_columns[columns::kAdvantages] = torch::zeros({3});
  batch.token_columns[columns::kOldLogprobs] = torch::zeros({3});
  ActorUpdateOptions with_kl;
  with_kl.kl_coef = 0.1;
  EXPECT_THROW(actor.update(batch, with_kl), Error);
  batch.token_columns[columns::kAdvantages] = torch::zeros({4});  // wrong length
  EXPECT_THROW(actor.update(batch, {}), Error);
}

TEST(ReferencePolicy, IsAFrozenCopy) {
  QwenForCausalLM policy = testing::tiny_model(13);
  ReferencePolicy reference(policy, {});
  TrainBatch batch = testing::tiny_batch({{2, 5}, {3, 4}});
  const torch::Tensor ref_before = reference.compute_logprobs(batch);
  ActorOptions options;
  options.trainer.optimizer.lr = 1e-2;
  ActorTrainer actor(policy, options);
  EXPECT_TRUE(torch::allclose(actor.compute_logprobs(batch).logprobs, ref_before, 1e-6, 1e-6));
  batch.token_columns[columns::kOldLogprobs] = ref_before;
  batch.token_columns[columns::kAdvantages] = torch::ones_like(ref_before);
  actor.update(batch, {});
  EXPECT_TRUE(torch::equal(reference.compute_logprobs(batch), ref_before));
  EXPECT_FALSE(torch::allclose(actor.compute_logprobs(batch).logprobs, ref_before, 1e-4, 1e-4));
  for (const auto& p : reference.model()->parameters()) EXPECT_FALSE(p.requires_grad());
}

}  // namespace
}  // namespace aspen::train
