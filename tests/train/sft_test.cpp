// SFT: only answer tokens are targets, accumulation is exact, and a tiny model
// learns a tiny task.
#include "aspen/train/sft.h"

#include <gtest/gtest.h>

#include <cmath>

#include "aspen/util/error.h"
#include "train/train_fixtures.h"

namespace aspen::train {
namespace {

// "ab" -> "ba": prompt BOS a b SEP, answer b a EOS, over letters 4..9.
std::vector<SftExample> swap_task() {
  std::vector<SftExample> examples;
  for (int64_t a = 4; a < 10; ++a) {
    for (int64_t b = 4; b < 10; ++b) examples.push_back({{1, a, b, 2}, {b, a, 3}});
  }
  return examples;
}

TEST(Sft, NllCountsAnswerTokensOnly) {
  QwenForCausalLM model = testing::tiny_model(29);
  SftTrainer trainer(model, {});
  const std::vector<SftExample> examples = {{{1, 4, 5, 2}, {5, 4, 3}}};
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::tensor({1, 4, 5, 2, 5, 4, 3}, torch::kLong);
  const torch::Tensor all =
      model->token_logprobs(ids, torch::tensor({0, 7}, torch::kLong)).logprobs;
  // Answer tokens are targets of positions 3, 4, 5.
  EXPECT_NEAR(trainer.evaluate_nll(examples), -all.slice(0, 3).mean().item<double>(), 1e-6);
}

TEST(Sft, MicroBatchingDoesNotChangeTheStep) {
  TrainerOptions big, small;
  big.optimizer.lr = small.optimizer.lr = 1e-2;
  big.max_tokens_per_micro_batch = 1 << 20;
  small.max_tokens_per_micro_batch = 8;
  big.compute_dtype = small.compute_dtype = torch::kDouble;
  SftTrainer a(testing::tiny_model(31, torch::kDouble), big);
  SftTrainer b(testing::tiny_model(31, torch::kDouble), small);
  const auto examples = swap_task();
  const SftStepMetrics ma = a.step(examples);
  const SftStepMetrics mb = b.step(examples);
  EXPECT_NEAR(ma.nll, mb.nll, 1e-10);
  EXPECT_NEAR(ma.grad_norm, mb.grad_norm, 1e-10);
  EXPECT_LT(testing::max_param_diff(*a.model(), *b.model()), 1e-9);
}

// MoE: with a coefficient the step also descends the load-balancing loss; the head,
// which that loss does not reach, takes the same step as without it.
TEST(Sft, MoeRouterAuxLossMovesTheRouterOnlyWithItsCoefficient) {
  TrainerOptions options;
  options.optimizer.lr = 1e-2;
  options.optimizer.max_grad_norm = 0.0;
  options.compute_dtype = torch::kDouble;
  SftTrainer plain(testing::tiny_moe_model(31, torch::kDouble), options);
  SftTrainer balanced(testing::tiny_moe_model(31, torch::kDouble), options,
                      /*router_aux_loss_coef=*/0.5);
  const auto examples = swap_task();
  EXPECT_NEAR(plain.step(examples).nll, balanced.step(examples).nll, 1e-12);  // before the step
  auto param = [](SftTrainer& t, const std::string& name) {
    return t.model()->named_parameters()[name].detach();
  };
  const std::string router = "model.layers.0.mlp.gate.weight";
  EXPECT_GT((param(plain, router) - param(balanced, router)).abs().max().item<double>(), 1e-6);
  EXPECT_LT(
      (param(plain, "lm_head.weight") - param(balanced, "lm_head.weight")).abs().max().item<double>(),
      1e-12);
}

TEST(Sft, TinyModelLearnsToSwapTwoTokens) {
  const auto examples = swap_task();
  QwenForCausalLM model = testing::tiny_model(37);
  SftOptions options;
  options.epochs = 10;
  options.batch_size = 12;
  options.seed = 5;
  options.trainer.optimizer.lr = 1e-2;
  options.trainer.optimizer.weight_decay = 0.0;
  options.trainer.optimizer.schedule.warmup_steps = 3;
  int64_t calls = 0;
  const auto history =
      run_sft(model, examples, options, [&](const SftStepMetrics&) { ++calls; });
  ASSERT_EQ(history.size(), 30u);
  EXPECT_EQ(calls, 30);
  EXPECT_EQ(history.back().epoch, 9);
  SftTrainer eval(model, {});
  const double initial = history.front().nll;
  const double final_nll = eval.evaluate_nll(examples);
  EXPECT_NEAR(initial, std::log(16.0), 0.2);  // a random model is near uniform
  EXPECT_LT(final_nll, 0.5 * initial) << "initial " << initial << " final " << final_nll;
}

TEST(Sft, EmptyPromptIsAnError) {
  SftTrainer trainer(testing::tiny_model(1), {});
  EXPECT_THROW(trainer.step({{{}, {4, 5}}}), Error);
}

}  // namespace
}  // namespace aspen::train
