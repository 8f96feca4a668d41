// End-to-end sanity: logits -> log-probs of sampled tokens -> PPO loss -> one SGD
// step must lower the loss and move log-probs the way the advantages say.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "aspen/algo/policy_loss.h"
#include "expect_tensor.h"

namespace aspen::algo {
namespace {

using testing::dvec;

TEST(PolicyUpdate, SmallSgdStepLowersTheClippedLossAndFollowsAdvantages) {
  torch::manual_seed(0);
  // T = 5 tokens over vocab V = 6, two sequences [3, 2].
  PackedSeqs packed = PackedSeqs::from_lengths({3, 2});
  torch::Tensor logits = torch::randn({5, 6}, torch::kDouble).requires_grad_(true);
  torch::Tensor tokens = torch::tensor({1, 4, 0, 2, 5}, torch::kLong);
  torch::Tensor adv = dvec({1, 1, 1, -0.5, -0.5});
  auto logprobs = [&] {
    return torch::log_softmax(logits, -1).gather(1, tokens.unsqueeze(1)).squeeze(1);
  };
  torch::Tensor old = logprobs().detach();
  PolicyLossOptions o;
  o.clip_ratio_c = 3.0;
  torch::optim::SGD sgd({logits}, torch::optim::SGDOptions(0.1));

  PolicyLossResult before = policy_loss({logprobs(), old, adv, {}}, packed, o);
  sgd.zero_grad();
  before.loss.backward();
  sgd.step();
  torch::Tensor after_logp = logprobs().detach();
  PolicyLossResult after = policy_loss({logprobs(), old, adv, {}}, packed, o);

  EXPECT_LT(after.loss.item<double>(), before.loss.item<double>());
  // On-policy start: loss = -mean(A) = -(3 - 1)/5.
  EXPECT_NEAR(before.loss.item<double>(), -0.4, 1e-12);
  torch::Tensor moved = after_logp - old;
  for (int t = 0; t < 3; ++t) EXPECT_GT(moved[t].item<double>(), 0) << t;  // A > 0: up
  for (int t = 3; t < 5; ++t) EXPECT_LT(moved[t].item<double>(), 0) << t;  // A < 0: down
}

}  // namespace
}  // namespace aspen::algo
