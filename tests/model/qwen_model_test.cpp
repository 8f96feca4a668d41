#include "aspen/model/qwen_model.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "aspen/model/weights_init.h"
#include "aspen/util/error.h"
#include "independent_qwen.h"
#include "tiny_configs.h"

namespace aspen::model {
namespace {

using testing::NamedConfig;
using testing::Weights;

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// Random weights with non-trivial norms and biases (HF init has ones/zeros there,
// which would hide a missing multiply or add).
QwenForCausalLM random_model(const ModelConfig& config, uint64_t seed) {
  QwenForCausalLM model = make_random_model(config, seed);
  torch::manual_seed(seed);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    if (item.key().find("norm") != std::string::npos ||
        item.key().find(".bias") != std::string::npos) {
      item.value().add_(torch::randn(item.value().sizes()) * 0.3);
    } else {
      item.value().mul_(10.0);  // std 0.2: attention and MLP actually mix tokens
    }
  }
  return model;
}

Weights detached_weights(const QwenForCausalLM& model, torch::ScalarType dtype) {
  Weights w;
  for (const auto& item : model->named_parameters()) {
    w[item.key()] = item.value().detach().to(dtype).clone();
  }
  return w;
}

const std::vector<int64_t> kOffsets = {0, 5, 6, 6, 13};  // lengths 5, 1, 0, 7

torch::Tensor packed_ids(int64_t vocab) {
  torch::manual_seed(123);
  return torch::randint(0, vocab, {kOffsets.back()}, torch::kLong);
}

torch::Tensor independent_hidden(const ModelConfig& c, const Weights& w, const torch::Tensor& ids) {
  std::vector<torch::Tensor> parts;
  for (size_t b = 0; b + 1 < kOffsets.size(); ++b) {
    const int64_t len = kOffsets[b + 1] - kOffsets[b];
    if (len > 0)
      parts.push_back(testing::ref_sequence_hidden(c, w, ids.narrow(0, kOffsets[b], len)));
  }
  return torch::cat(parts, 0);
}

class QwenModelParity : public ::testing::TestWithParam<NamedConfig> {};

TEST_P(QwenModelParity, Fp32ForwardMatchesIndependentFormulas) {
  const ModelConfig& c = GetParam().config;
  QwenForCausalLM model = random_model(c, 1);
  torch::Tensor ids = packed_ids(c.vocab_size);
  torch::NoGradGuard no_grad;
  torch::Tensor got = model(ids, torch::tensor(kOffsets, torch::kLong));
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{13, c.hidden_size}));
  torch::Tensor want = independent_hidden(c, detached_weights(model, torch::kDouble), ids);
  EXPECT_LE(max_abs_diff(got, want), 1e-5);
}

TEST_P(QwenModelParity, PackedForwardEqualsEachSequenceAlone) {
  const ModelConfig& c = GetParam().config;
  QwenForCausalLM model = random_model(c, 2);
  torch::Tensor ids = packed_ids(c.vocab_size);
  torch::NoGradGuard no_grad;
  torch::Tensor packed = model(ids, torch::tensor(kOffsets, torch::kLong));
  for (size_t b = 0; b + 1 < kOffsets.size(); ++b) {
    const int64_t len = kOffsets[b + 1] - kOffsets[b];
    if (len == 0) continue;
    torch::Tensor alone =
        model(ids.narrow(0, kOffsets[b], len), torch::tensor({int64_t{0}, len}, torch::kLong));
    // Only GEMM blocking differs with T: fp32 rounding, not a semantic difference.
    EXPECT_LE(max_abs_diff(packed.narrow(0, kOffsets[b], len), alone), 1e-5) << "sequence " << b;
  }
}

TEST_P(QwenModelParity, GradientsOfEveryParameterMatchIndependentInDouble) {
  const ModelConfig& c = GetParam().config;
  QwenForCausalLM model = random_model(c, 3);
  model->to(torch::kDouble);
  torch::Tensor ids = packed_ids(c.vocab_size);
  torch::manual_seed(9);
  torch::Tensor probe = torch::randn({13, c.hidden_size}, torch::kDouble);

  // Loss = <hidden, probe> + sum of next-token logprobs: exercises the head too.
  LogprobHeadOptions options;
  options.chunk_size = 7;
  torch::Tensor cu = torch::tensor(kOffsets, torch::kLong);
  torch::Tensor loss =
      (model(ids, cu) * probe).sum() + model->token_logprobs(ids, cu, options).logprobs.sum();
  loss.backward();

  Weights leaves = detached_weights(model, torch::kDouble);
  for (auto& entry : leaves) entry.second.requires_grad_(true);
  torch::Tensor hidden = independent_hidden(c, leaves, ids);
  torch::Tensor ref_loss = (hidden * probe).sum();
  std::vector<torch::Tensor> rows, targets;
  for (size_t b = 0; b + 1 < kOffsets.size(); ++b) {
    for (int64_t t = kOffsets[b]; t + 1 < kOffsets[b + 1]; ++t) {
      rows.push_back(torch::tensor(t));  // hidden rows are packed in the same order
      targets.push_back(ids[t + 1]);
    }
  }
  torch::Tensor logits =
      torch::matmul(hidden.index_select(0, torch::stack(rows)), testing::ref_head(c, leaves).t());
  ref_loss =
      ref_loss + torch::log_softmax(logits, -1).gather(1, torch::stack(targets).unsqueeze(1)).sum();
  ref_loss.backward();

  EXPECT_NEAR(loss.item<double>(), ref_loss.item<double>(), 1e-9);
  for (const auto& item : model->named_parameters()) {
    if (!item.value().grad().defined() && item.key().find(".mlp.experts.") != std::string::npos) {
      // An expert no token chose is not in the graph, in the reference either.
      EXPECT_FALSE(leaves.at(item.key()).grad().defined()) << item.key();
      continue;
    }
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    EXPECT_LE(max_abs_diff(item.value().grad(), leaves.at(item.key()).grad()), 1e-9) << item.key();
  }
}

TEST_P(QwenModelParity, TokenLogprobsMatchFullLogSoftmax) {
  const ModelConfig& c = GetParam().config;
  QwenForCausalLM model = random_model(c, 4);
  torch::Tensor ids = packed_ids(c.vocab_size);
  torch::NoGradGuard no_grad;
  LogprobHeadOptions options;
  options.chunk_size = 16;
  options.with_entropy = true;
  TokenLogprobs got = model->token_logprobs(ids, torch::tensor(kOffsets, torch::kLong), options);
  ASSERT_EQ(got.logprobs.size(0), 13 - 3);  // n-1 per non-empty sequence: 4 + 0 + 6
  Weights w = detached_weights(model, torch::kDouble);
  std::vector<double> want_lp, want_ent;
  for (size_t b = 0; b + 1 < kOffsets.size(); ++b) {
    const int64_t len = kOffsets[b + 1] - kOffsets[b];
    if (len < 2) continue;
    torch::Tensor seq = ids.narrow(0, kOffsets[b], len);
    torch::Tensor logp = torch::log_softmax(
        torch::matmul(testing::ref_sequence_hidden(c, w, seq), testing::ref_head(c, w).t()), -1);
    for (int64_t t = 0; t + 1 < len; ++t) {
      want_lp.push_back(logp[t][seq[t + 1].item<int64_t>()].item<double>());
      want_ent.push_back(-(logp[t].exp() * logp[t]).sum().item<double>());
    }
  }
  EXPECT_LE(max_abs_diff(got.logprobs, torch::tensor(want_lp, torch::kDouble)), 1e-5);
  EXPECT_LE(max_abs_diff(got.entropy, torch::tensor(want_ent, torch::kDouble)), 1e-5);
}

TEST_P(QwenModelParity, Bf16ComputeCloseToFp32) {
  const ModelConfig& c = GetParam().config;
  QwenForCausalLM model = random_model(c, 5);
  torch::Tensor ids = packed_ids(c.vocab_size);
  torch::Tensor cu = torch::tensor(kOffsets, torch::kLong);
  torch::NoGradGuard no_grad;
  TokenLogprobs fp32 = model->token_logprobs(ids, cu);
  model->to(torch::kBFloat16);
  torch::Tensor hidden = model(ids, cu);
  EXPECT_EQ(hidden.scalar_type(), torch::kBFloat16);
  TokenLogprobs bf16 = model->token_logprobs(ids, cu);
  EXPECT_EQ(bf16.logprobs.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::isfinite(bf16.logprobs).all().item<bool>());
  // bf16 keeps ~3 significant digits; over two layers logprobs drift by a few 0.01.
  EXPECT_LE(max_abs_diff(bf16.logprobs, fp32.logprobs), 0.25);
  EXPECT_LE((bf16.logprobs - fp32.logprobs).abs().mean().item<float>(), 0.08);
}

TEST_P(QwenModelParity, FusedProjectionsGiveTheSameForwardAndGradients) {
  const ModelConfig& c = GetParam().config;
  QwenForCausalLM fused = random_model(c, 7);
  QwenForCausalLM separate = random_model(c, 7);
  fused->fuse_projections();
  torch::Tensor ids = packed_ids(c.vocab_size);
  torch::Tensor cu = torch::tensor(kOffsets, torch::kLong);
  {
    torch::NoGradGuard no_grad;  // the fused GEMMs run here
    EXPECT_LE(max_abs_diff(fused(ids, cu), separate(ids, cu)), 1e-5);
  }
  // With gradients wanted the separate GEMMs run, on the same (fused) memory.
  torch::Tensor probe = torch::randn({13, c.hidden_size});
  (fused(ids, cu) * probe).sum().backward();
  (separate(ids, cu) * probe).sum().backward();
  const auto want = separate->named_parameters();
  for (const auto& item : fused->named_parameters()) {
    if (!want[item.key()].grad().defined()) continue;  // e.g. unused experts
    EXPECT_LE(max_abs_diff(item.value().grad(), want[item.key()].grad()), 1e-5) << item.key();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, QwenModelParity, ::testing::ValuesIn(testing::tiny_configs()),
                         [](const auto& info) { return info.param.name; });

TEST(QwenModel, ExplicitPositionsDriveRope) {
  ModelConfig c = testing::tiny_config(ModelFamily::kQwen3, false, 8);
  QwenForCausalLM model = random_model(c, 6);
  torch::Tensor ids = torch::tensor({3, 4, 5}, torch::kLong);
  torch::Tensor cu = torch::tensor({0, 3}, torch::kLong);
  torch::NoGradGuard no_grad;
  torch::Tensor from_zero = model(ids, cu, torch::arange(3, torch::kLong));
  EXPECT_TRUE(torch::allclose(from_zero, model(ids, cu)));
  // RoPE encodes relative positions only: a constant shift changes nothing ...
  EXPECT_LE(max_abs_diff(model(ids, cu, torch::arange(10, 13, torch::kLong)), from_zero), 1e-4);
  // ... while a gap between tokens does.
  EXPECT_GT(max_abs_diff(model(ids, cu, torch::tensor({0, 1, 7}, torch::kLong)), from_zero), 1e-3);
}

TEST(QwenModel, SingleTokenSequencesHaveNoLogprobs) {
  QwenForCausalLM model(testing::tiny_config(ModelFamily::kQwen3, true, 8));
  torch::NoGradGuard no_grad;
  LogprobHeadOptions options;
  options.with_entropy = true;
  TokenLogprobs out = model->token_logprobs(torch::tensor({4, 9}, torch::kLong),
                                            torch::tensor({0, 1, 2}, torch::kLong), options);
  EXPECT_EQ(out.logprobs.numel(), 0);
  EXPECT_EQ(out.entropy.numel(), 0);
}

TEST(QwenModel, BadBatchesAreErrorsNamingTheArgument) {
  ModelConfig c = testing::tiny_config(ModelFamily::kQwen2, true, 8);
  QwenForCausalLM model(c);
  torch::NoGradGuard no_grad;
  auto input_of = [&](const torch::Tensor& ids, const torch::Tensor& cu) -> std::string {
    try {
      model(ids, cu);
    } catch (const Error& e) {
      return e.input();
    }
    return "no error";
  };
  torch::Tensor ids = torch::tensor({1, 2, 3}, torch::kLong);
  EXPECT_EQ(input_of(ids, torch::tensor({0, 2}, torch::kLong)), "cu_seqlens");
  EXPECT_EQ(input_of(ids, torch::tensor({0, 3, 2}, torch::kLong)), "cu_seqlens");
  EXPECT_EQ(input_of(ids, torch::tensor({1, 3}, torch::kLong)), "cu_seqlens");
  EXPECT_EQ(input_of(torch::tensor({1, 50, 3}, torch::kLong), torch::tensor({0, 3}, torch::kLong)),
            "input_ids");
  EXPECT_EQ(input_of(ids.to(torch::kInt), torch::tensor({0, 3}, torch::kLong)), "input_ids");
}

}  // namespace
}  // namespace aspen::model
