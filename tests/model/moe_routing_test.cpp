// Top-k routing and the load-balancing loss against values computed by hand, and
// the grouped MoE block against a token-by-token loop.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "aspen/model/moe_routing.h"
#include "aspen/model/qwen_moe_block.h"
#include "aspen/util/error.h"
#include "tiny_configs.h"

namespace aspen::model {
namespace {

double moe_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

TEST(MoeRouting, TopKTakesTheLargestProbabilitiesAndRenormalisesOnlyWhenAsked) {
  // One token, logits log(1), log(2), log(3), log(4): probabilities 0.1 0.2 0.3 0.4.
  const torch::Tensor logits =
      torch::tensor({{std::log(1.0), std::log(2.0), std::log(3.0), std::log(4.0)}});
  const RouterChoice raw = route_top_k(logits, 2, /*norm_topk_prob=*/false);
  EXPECT_EQ(raw.experts[0][0].item<int64_t>(), 3);
  EXPECT_EQ(raw.experts[0][1].item<int64_t>(), 2);
  EXPECT_NEAR(raw.weights[0][0].item<double>(), 0.4, 1e-6);
  EXPECT_NEAR(raw.weights[0][1].item<double>(), 0.3, 1e-6);
  const RouterChoice norm = route_top_k(logits, 2, /*norm_topk_prob=*/true);
  EXPECT_NEAR(norm.weights[0][0].item<double>(), 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(norm.weights[0][1].item<double>(), 0.3 / 0.7, 1e-6);
  // bf16 logits: softmax in fp32, weights handed back in bf16 (transformers' casts).
  const RouterChoice bf16 = route_top_k(logits.to(torch::kBFloat16), 2, false);
  EXPECT_EQ(bf16.probs.scalar_type(), torch::kFloat);
  EXPECT_EQ(bf16.weights.scalar_type(), torch::kBFloat16);
}

// Two layers, two tokens each, E = 3, k = 1, probabilities given directly by logits
// log(p) (softmax of log p is p when p sums to 1):
//   layer 0: token a (0.5, 0.3, 0.2) -> expert 0;  token b (0.1, 0.7, 0.2) -> expert 1
//   layer 1: token a (0.6, 0.1, 0.3) -> expert 0;  token b (0.2, 0.2, 0.6) -> expert 2
// N = 4 rows. f = (2, 1, 1) / 4. P = (1.4, 1.3, 1.3) / 4.
// loss = 3 * (2*1.4 + 1*1.3 + 1*1.3) / 16 = 3 * 5.4 / 16 = 1.0125.
// d loss / d p_{l,t,e} = 3 * f_e / 4 = (0.375, 0.1875, 0.1875) for every row.
TEST(MoeRouting, LoadBalancingLossAndGradientEqualTheHandComputedValues) {
  const torch::Tensor p0 = torch::tensor({{0.5, 0.3, 0.2}, {0.1, 0.7, 0.2}}, torch::kDouble);
  const torch::Tensor p1 = torch::tensor({{0.6, 0.1, 0.3}, {0.2, 0.2, 0.6}}, torch::kDouble);
  torch::Tensor l0 = p0.log().requires_grad_(true);
  torch::Tensor l1 = p1.log().requires_grad_(true);
  MoeRoutingLog log;
  log.layers.push_back(layer_routing(route_top_k(l0, 1, false)));
  log.layers.push_back(layer_routing(route_top_k(l1, 1, false)));
  EXPECT_EQ(moe_diff(log.layers[0].assignments, torch::tensor({1.0, 1.0, 0.0})), 0.0);
  EXPECT_EQ(moe_diff(log.layers[1].assignments, torch::tensor({1.0, 0.0, 1.0})), 0.0);
  const torch::Tensor loss = load_balancing_loss(log);
  EXPECT_NEAR(loss.item<double>(), 1.0125, 1e-12);

  loss.backward();
  // Through the softmax: d loss / d logit_{t,j} = p_j * (g_j - sum_e p_e g_e).
  const torch::Tensor g = torch::tensor({0.375, 0.1875, 0.1875}, torch::kDouble);
  for (const auto& [p, logits] : {std::pair{p0, l0}, std::pair{p1, l1}}) {
    const torch::Tensor want = p * (g - (p * g).sum(-1, true));
    EXPECT_LE(moe_diff(logits.grad(), want), 1e-12);
  }
}

TEST(MoeRouting, ABalancedRouterScoresK) {
  // Uniform probabilities with each expert chosen equally often: f_e = k/E, P_e = 1/E.
  const int64_t experts = 4, k = 2;
  MoeRoutingLog log;
  LayerRouting layer;
  layer.tokens = 8;
  layer.prob_sum = torch::full({experts}, 8.0 / experts);
  layer.assignments = torch::full({experts}, 8.0 * k / experts);
  log.layers.push_back(layer);
  EXPECT_NEAR(load_balancing_loss(log).item<double>(), static_cast<double>(k), 1e-6);
  EXPECT_EQ(load_balancing_loss(MoeRoutingLog{}).item<double>(), 0.0);  // a dense model
}

// DeepSeek-V3's noaux_tc routing on numbers worked by hand. 6 experts in 3 groups of
// 2, one group per token, top-2.
//   token 0: logits 0 -> s = 0.5 everywhere; bias [0, 0, 0, 0, 0.3, 0.1] makes group 2
//            (experts 4, 5: 0.8 + 0.6 = 1.4) the only one allowed; weights 0.5, 0.5
//            renormalised to 0.5 each, times 2 -> 1 and 1. The bias moved the choice,
//            not the weights.
//   token 1: logit 3 on expert 1 and 2 on expert 0, -3 elsewhere: group 0 wins (the
//            bias 0.3 on expert 4 cannot lift s(-3) + 0.3 + s(-3) past it); weights
//            s(3) and s(2) renormalised, times 2.
TEST(MoeRouting, GroupLimitedSigmoidRoutingEqualsTheHandComputedChoice) {
  const torch::Tensor logits = torch::tensor({{0.0, 0.0, 0.0, 0.0, 0.0, 0.0},
                                              {2.0, 3.0, -3.0, -3.0, -3.0, -3.0}},
                                             torch::kDouble);
  const torch::Tensor bias = torch::tensor({0.0, 0.0, 0.0, 0.0, 0.3, 0.1}, torch::kDouble);
  GroupLimitedRouting options;
  options.k = 2;
  options.n_group = 3;
  options.topk_group = 1;
  options.norm_topk_prob = true;
  options.routed_scaling_factor = 2.0;
  const RouterChoice choice = route_grouped_sigmoid(logits, bias, options);
  EXPECT_EQ(choice.experts[0][0].item<int64_t>(), 4);
  EXPECT_EQ(choice.experts[0][1].item<int64_t>(), 5);
  EXPECT_NEAR(choice.weights[0][0].item<double>(), 1.0, 1e-12);
  EXPECT_NEAR(choice.weights[0][1].item<double>(), 1.0, 1e-12);
  EXPECT_EQ(choice.experts[1][0].item<int64_t>(), 1);
  EXPECT_EQ(choice.experts[1][1].item<int64_t>(), 0);
  const double s3 = 1.0 / (1.0 + std::exp(-3.0)), s2 = 1.0 / (1.0 + std::exp(-2.0));
  EXPECT_NEAR(choice.weights[1][0].item<double>(), 2.0 * s3 / (s3 + s2), 1e-12);
  EXPECT_NEAR(choice.weights[1][1].item<double>(), 2.0 * s2 / (s3 + s2), 1e-12);
  // Without renormalisation the weights are the raw scores, scaled.
  options.norm_topk_prob = false;
  const RouterChoice raw = route_grouped_sigmoid(logits, bias, options);
  EXPECT_NEAR(raw.weights[1][0].item<double>(), 2.0 * s3, 1e-12);
  // The balance statistics see the normalised affinities s / sum(s).
  EXPECT_NEAR(choice.probs[0].sum().item<double>(), 1.0, 1e-12);
  EXPECT_NEAR(choice.probs[0][3].item<double>(), 1.0 / 6.0, 1e-12);
}

TEST(QwenSparseMoeBlock, GroupedExpertsEqualATokenByTokenLoopForwardAndBackward) {
  ModelConfig config = testing::tiny_moe_config();
  config.moe.norm_topk_prob = false;
  torch::manual_seed(5);
  QwenSparseMoeBlock block(config);
  block->to(torch::kDouble);
  for (auto& p : block->parameters()) p.data().normal_(0.0, 0.3);
  const torch::Tensor x = torch::randn({11, config.hidden_size}, torch::kDouble);
  MoeRoutingLog log;
  const torch::Tensor got = block->forward(x, &log);
  ASSERT_EQ(log.layers.size(), 1u);
  EXPECT_EQ(log.layers[0].tokens, 11);
  EXPECT_EQ(log.layers[0].assignments.sum().item<double>(), 22.0);  // T * k slots

  // Token by token: softmax, top-k, weighted sum of the chosen experts.
  std::vector<torch::Tensor> rows;
  for (int64_t t = 0; t < x.size(0); ++t) {
    const torch::Tensor xt = x.slice(0, t, t + 1);
    const torch::Tensor probs = torch::softmax(block->gate(xt), -1).squeeze(0);
    auto [top, chosen] = probs.topk(config.moe.num_experts_per_tok);
    torch::Tensor out = torch::zeros_like(xt);
    for (int64_t j = 0; j < top.size(0); ++j) {
      out = out + top[j] * block->expert(chosen[j].item<int64_t>())->forward(xt);
    }
    rows.push_back(out);
  }
  const torch::Tensor want = torch::cat(rows, 0);
  EXPECT_LE(moe_diff(got, want), 1e-12);

  const torch::Tensor probe = torch::randn_like(x);
  const auto grads_of = [&](const torch::Tensor& y) {
    block->zero_grad();
    (y * probe).sum().backward({}, /*retain_graph=*/true);
    std::vector<torch::Tensor> grads;
    for (auto& p : block->parameters()) {
      grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    }
    return grads;
  };
  const auto grouped = grads_of(got);
  const auto looped = grads_of(want);
  for (size_t i = 0; i < grouped.size(); ++i) EXPECT_LE(moe_diff(grouped[i], looped[i]), 1e-12);
}

TEST(QwenSparseMoeBlock, NoTokensGiveAnEmptyOutput) {
  QwenSparseMoeBlock block(testing::tiny_moe_config());
  const torch::Tensor out = block->forward(torch::zeros({0, 32}));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{0, 32}));
}

}  // namespace
}  // namespace aspen::model
