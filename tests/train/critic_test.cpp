// Critic: HF token-classification layout, values at the right positions, and the
// clipped value update reduces the value loss.
#include "aspen/train/critic.h"

#include <gtest/gtest.h>

#include "aspen/train/micro_batches.h"
#include "train/train_fixtures.h"

namespace aspen::train {
namespace {

TEST(CriticModel, StartsFromThePolicyDecoderWithAZeroHead) {
  QwenForCausalLM policy = testing::tiny_model(17);
  CriticModel critic = critic_from_policy(policy);
  const auto params = critic->named_parameters(true);
  ASSERT_TRUE(params.contains("score.weight"));
  ASSERT_TRUE(params.contains("score.bias"));
  EXPECT_EQ(params["score.weight"].sizes(), (std::vector<int64_t>{1, 16}));
  EXPECT_TRUE(torch::equal(params["model.embed_tokens.weight"],
                           policy->named_parameters(true)["model.embed_tokens.weight"]));
  EXPECT_FALSE(params.contains("lm_head.weight"));
  TrainBatch batch = testing::tiny_batch({{2, 3}, {3, 2}});
  CriticTrainer trainer(critic, {});
  EXPECT_TRUE(torch::equal(trainer.compute_values(batch), torch::zeros({5})));
}

TEST(CriticModel, ValueOfTokenJIsTheHeadAtPositionBeforeIt) {
  CriticModel critic = critic_from_policy(testing::tiny_model(19));
  {
    torch::NoGradGuard no_grad;
    critic->score->weight.normal_(0.0, 1.0);
    critic->score->bias.fill_(0.1);
  }
  TrainBatch batch = testing::tiny_batch({{2, 3}, {3, 2}});
  const MicroBatch mb = pack_rows(batch, {0, 1}, torch::kCPU);
  torch::NoGradGuard no_grad;
  const torch::Tensor hidden = critic->model->forward(
      mb.input_ids, mb.cu_seqlens, torch::tensor({0, 1, 2, 3, 4, 0, 1, 2, 3, 4}, torch::kLong));
  const torch::Tensor expected = critic->score(hidden).squeeze(-1).index_select(
      0, torch::tensor({1, 2, 3, 7, 8}, torch::kLong));
  EXPECT_TRUE(torch::allclose(critic->response_values(mb, false), expected, 1e-6, 1e-6));
}

TEST(CriticTrainer, UpdateReducesTheValueLoss) {
  TrainerOptions options;
  options.optimizer.lr = 1e-2;
  options.max_tokens_per_micro_batch = 16;
  CriticTrainer trainer(critic_from_policy(testing::tiny_model(23)), options);
  TrainBatch batch = testing::tiny_batch({{2, 5}, {3, 4}, {2, 6}, {3, 5}});
  const int64_t r = batch.num_response_tokens();
  const torch::Tensor returns = 0.3 + 0.1 * torch::sin(torch::arange(r, torch::kFloat) * 0.7);
  batch.token_columns[columns::kReturns] = returns;
  auto mse = [&] { return (trainer.compute_values(batch) - returns).pow(2).mean().item<double>(); };
  const double before = mse();
  CriticUpdateOptions update;
  update.mini_batch_size = 2;
  update.epochs = 2;
  for (int round = 0; round < 5; ++round) {
    batch.token_columns[columns::kValues] = trainer.compute_values(batch);
    const CriticMetrics metrics = trainer.update(batch, update);
    EXPECT_EQ(metrics.steps, 4);
    EXPECT_GT(metrics.grad_norm, 0.0);
  }
  EXPECT_LT(mse(), 0.5 * before);
}

}  // namespace
}  // namespace aspen::train
