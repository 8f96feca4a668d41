// bf16 compute with fp32 master weights tracks fp32 training; activation recompute
// gives the same gradients as the plain forward.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "aspen/train/micro_batches.h"
#include "aspen/train/policy_logprobs.h"
#include "aspen/train/precision.h"
#include "aspen/train/sft.h"
#include "train/train_fixtures.h"

namespace aspen::train {
namespace {

std::vector<SftExample> copy_task() {
  std::vector<SftExample> examples;
  for (int64_t a = 4; a < 10; ++a) examples.push_back({{1, a, 2}, {a, a, 3}});
  return examples;
}

TEST(MasterWeights, AccumulatesBf16GradsInFp32AndPublishes) {
  torch::Tensor master = torch::tensor({1.0f, 2.0f}).requires_grad_(true);
  torch::Tensor compute = torch::zeros({2}, torch::kBFloat16).requires_grad_(true);
  MasterWeights weights({{"w", master}}, {{"w", compute}});
  EXPECT_TRUE(weights.separate());
  EXPECT_TRUE(torch::equal(compute, master.to(torch::kBFloat16)));  // copied at construction
  for (int i = 0; i < 2; ++i) {
    compute.mutable_grad() = torch::tensor({0.5f, 1.0f}).to(torch::kBFloat16);
    weights.accumulate_grads();
    EXPECT_FALSE(compute.grad().defined());
  }
  EXPECT_EQ(master.grad().scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(master.grad(), torch::tensor({1.0f, 2.0f})));
  OptimizerOptions o;
  o.lr = 0.25;
  o.weight_decay = 0.0;
  Optimizer opt(weights.master(), o);
  weights.step(opt);
  EXPECT_NEAR(master[0].item<double>(), 0.75, 1e-6);  // first Adam step: lr * sign(g)
  EXPECT_TRUE(torch::equal(compute, master.detach().to(torch::kBFloat16)));
}

TEST(MasterWeights, SharedTensorsMakeEveryCallANoOp) {
  torch::Tensor w = torch::tensor({1.0f}).requires_grad_(true);
  MasterWeights weights({{"w", w}}, {{"w", w}});
  EXPECT_FALSE(weights.separate());
  w.mutable_grad() = torch::tensor({3.0f});
  weights.accumulate_grads();
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({3.0f})));
}

TEST(Precision, Bf16MasterWeightsTrackFp32Training) {
  TrainerOptions fp32;
  fp32.optimizer.lr = 1e-2;
  TrainerOptions bf16 = fp32;
  bf16.compute_dtype = torch::kBFloat16;
  SftTrainer a(testing::tiny_model(3), fp32);
  SftTrainer b(testing::tiny_model(3), bf16);
  EXPECT_EQ(b.model()->lm_head_weight().scalar_type(), torch::kFloat);  // master stays fp32
  const auto examples = copy_task();
  double first = 0.0, last_a = 0.0, last_b = 0.0;
  for (int step = 0; step < 8; ++step) {
    const SftStepMetrics ma = a.step(examples);
    const SftStepMetrics mb = b.step(examples);
    if (step == 0) first = ma.nll;
    EXPECT_NEAR(ma.nll, mb.nll, 0.05) << "step " << step;
    last_a = ma.nll;
    last_b = mb.nll;
  }
  EXPECT_LT(last_a, first - 0.1);  // both actually trained
  EXPECT_LT(last_b, first - 0.1);
}

TEST(Recompute, GradientsEqualThePlainForward) {
  QwenForCausalLM model = testing::tiny_model(5, torch::kDouble);
  TrainBatch batch = testing::tiny_batch({{3, 5}, {2, 4}, {4, 3}});
  const MicroBatch mb = pack_rows(batch, {0, 1, 2}, torch::kCPU);
  const torch::Tensor weights = torch::linspace(-1.0, 1.0, mb.num_response_tokens, torch::kDouble);
  auto grads = [&](bool recompute) {
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    LogprobHeadOptions head;
    head.with_entropy = true;
    TokenLogprobs lp = response_logprobs(model, mb, head, recompute);
    ((lp.logprobs * weights).sum() + 0.1 * lp.entropy.sum()).backward();
    std::vector<torch::Tensor> out;
    for (auto& p : model->parameters()) out.push_back(p.grad().clone());
    return out;
  };
  const auto plain = grads(false);
  const auto recomputed = grads(true);
  ASSERT_EQ(plain.size(), recomputed.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_GT(plain[i].abs().max().item<double>(), 0.0) << i;  // every parameter is reached
    EXPECT_LT((plain[i] - recomputed[i]).abs().max().item<double>(), 1e-12) << i;
  }
}

// The MoE load-balancing loss through checkpointed layers: the routing statistics come
// out of the recomputed layer as a second output, and their gradient reaches the
// router and everything below it as in the plain forward.
TEST(Recompute, MoeLoadBalancingGradientsEqualThePlainForward) {
  QwenForCausalLM model = testing::tiny_moe_model(5, torch::kDouble);
  TrainBatch batch = testing::tiny_batch({{3, 5}, {2, 4}, {4, 3}});
  const MicroBatch mb = pack_rows(batch, {0, 1, 2}, torch::kCPU);
  const torch::Tensor weights = torch::linspace(-1.0, 1.0, mb.num_response_tokens, torch::kDouble);
  auto grads = [&](bool recompute, double aux_coef) {
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    MoeRoutingLog routing;
    TokenLogprobs lp = response_logprobs(model, mb, LogprobHeadOptions{}, recompute, &routing);
    EXPECT_EQ(routing.layers.size(), 1u);  // layer 0 sparse, layer 1 dense
    ((lp.logprobs * weights).sum() + aux_coef * load_balancing_loss(routing)).backward();
    std::map<std::string, torch::Tensor> out;
    for (auto& item : model->named_parameters()) {
      if (item.value().grad().defined()) out[item.key()] = item.value().grad().clone();
    }
    return out;
  };
  const auto plain = grads(false, 0.5);
  const auto recomputed = grads(true, 0.5);
  const auto without_aux = grads(false, 0.0);
  ASSERT_EQ(plain.size(), recomputed.size());
  const std::string router = "model.layers.0.mlp.gate.weight";
  for (const auto& [name, grad] : plain) {
    ASSERT_EQ(recomputed.count(name), 1u) << name;
    EXPECT_LT((grad - recomputed.at(name)).abs().max().item<double>(), 1e-12) << name;
  }
  // The aux term does reach the router.
  EXPECT_GT((plain.at(router) - without_aux.at(router)).abs().max().item<double>(), 1e-6);
}

}  // namespace
}  // namespace aspen::train
