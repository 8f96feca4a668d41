// Routing replay (R3) in one sparse MoE block: replayed rows go to the given experts
// with the router's own probabilities of those experts as combine weights (and their
// gradient), rows of -1 keep their top-k, and replaying the block's own choice changes
// nothing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "aspen/model/moe_routing.h"
#include "aspen/model/qwen_moe_block.h"
#include "aspen/util/error.h"
#include "tiny_configs.h"

namespace aspen::model {
namespace {

double replay_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

struct ReplayBlock {
  ModelConfig config = testing::tiny_moe_config();  // norm_topk_prob: renormalised weights
  QwenSparseMoeBlock block{nullptr};
  torch::Tensor x;
  ReplayBlock() {
    torch::manual_seed(11);
    block = QwenSparseMoeBlock(config);
    block->to(torch::kDouble);
    for (auto& p : block->parameters()) p.data().normal_(0.0, 0.3);
    x = torch::randn({7, config.hidden_size}, torch::kDouble);
  }
  std::vector<torch::Tensor> grads(const torch::Tensor& y, const torch::Tensor& probe) {
    block->zero_grad();
    (y * probe).sum().backward({}, /*retain_graph=*/true);
    std::vector<torch::Tensor> out;
    for (auto& p : block->parameters()) {
      out.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
    }
    return out;
  }
};

TEST(RoutingReplay, ReplayedRowsUseTheGivenExpertsWithTheRoutersProbabilitiesAndGradient) {
  ReplayBlock b;
  const int64_t k = b.config.moe.num_experts_per_tok;
  const int64_t tokens = b.x.size(0);
  // Rows 0-4 replay the router's LEAST probable k experts (never its own choice); rows
  // 5-6 are -1 and keep their own top-k.
  torch::Tensor replay;
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor probs = torch::softmax(b.block->gate(b.x), -1);
    replay = std::get<1>(probs.topk(k, -1, /*largest=*/false));
    replay.narrow(0, 5, 2).fill_(-1);
  }
  MoeRoutingLog log;
  log.replay = replay.unsqueeze(1);  // one sparse layer
  const torch::Tensor got = b.block->forward(b.x, &log);
  ASSERT_EQ(log.layers.size(), 1u);
  EXPECT_TRUE(log.layers[0].experts.narrow(0, 0, 5).equal(replay.narrow(0, 0, 5)));

  // Token by token: the replayed experts weighted by softmax(gate x) at them,
  // renormalised over the k (norm_topk_prob), or the token's own top-k.
  std::vector<torch::Tensor> rows;
  for (int64_t t = 0; t < tokens; ++t) {
    const torch::Tensor xt = b.x.slice(0, t, t + 1);
    const torch::Tensor probs = torch::softmax(b.block->gate(xt), -1).squeeze(0);
    torch::Tensor chosen = t < 5 ? replay[t] : std::get<1>(probs.topk(k));
    torch::Tensor w = probs.index_select(0, chosen);
    w = w / w.sum();
    torch::Tensor out = torch::zeros_like(xt);
    for (int64_t j = 0; j < k; ++j) {
      out = out + w[j] * b.block->expert(chosen[j].item<int64_t>())->forward(xt);
    }
    rows.push_back(out);
  }
  const torch::Tensor want = torch::cat(rows, 0);
  EXPECT_LE(replay_diff(got, want), 1e-12);
  const torch::Tensor own = b.block->forward(b.x);
  EXPECT_GT(replay_diff(got.narrow(0, 0, 5), own.narrow(0, 0, 5)), 1e-3);  // it did differ
  EXPECT_LE(replay_diff(got.narrow(0, 5, 2), own.narrow(0, 5, 2)), 1e-12);

  // The gradient (the gate's included: it flows through the replayed probabilities).
  const torch::Tensor probe = torch::randn_like(b.x);
  const auto replayed = b.grads(got, probe);
  const auto looped = b.grads(want, probe);
  ASSERT_EQ(replayed.size(), looped.size());
  for (size_t i = 0; i < replayed.size(); ++i) EXPECT_LE(replay_diff(replayed[i], looped[i]), 1e-12);
  EXPECT_GT(b.block->gate->weight.grad().abs().sum().item<double>(), 0.0);
}

TEST(RoutingReplay, ReplayingTheBlocksOwnChoiceChangesNothing) {
  ReplayBlock b;
  MoeRoutingLog own_log;
  const torch::Tensor own = b.block->forward(b.x, &own_log);
  MoeRoutingLog log;
  log.replay = own_log.layers[0].experts.unsqueeze(1);
  EXPECT_TRUE(b.block->forward(b.x, &log).equal(own));
}

TEST(RoutingReplay, ExpertIdsOutOfRangeAreRefused) {
  ReplayBlock b;
  MoeRoutingLog log;
  log.replay = torch::full({b.x.size(0), 1, b.config.moe.num_experts_per_tok},
                           b.config.moe.num_experts, torch::kLong);
  EXPECT_THROW(b.block->forward(b.x, &log), Error);
}

}  // namespace
}  // namespace aspen::model
