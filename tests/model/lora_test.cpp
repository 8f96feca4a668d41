// LoRA on the Qwen models (model/lora.h), pinned against the merged-weight math:
// y = x (W + s B A)^T, dL/dB = s G A^T and dL/dA = s B^T G for G = dL/dW of the merged
// model.
#include "aspen/model/lora.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <thread>

#include "aspen/model/qwen_model.h"
#include "aspen/util/error.h"
#include "support/tiny_model_configs.h"

namespace aspen::model {
namespace {

using aspen::testing::tiny_config;
using aspen::testing::tiny_deepseek_config;
using aspen::testing::tiny_moe_config;

struct Packed {
  torch::Tensor ids, cu_seqlens;
};

Packed packed_batch(int64_t vocab) {
  torch::manual_seed(11);
  return {torch::randint(vocab, {9}, torch::kLong), torch::tensor({0, 4, 9}, torch::kLong)};
}

LoraOptions options_of_rank(int64_t rank, double alpha = 16.0) {
  LoraOptions options;
  options.rank = rank;
  options.alpha = alpha;
  return options;
}

// A model and an adapter with non-zero B (a fresh B is zero, which proves little).
QwenForCausalLM model_with_adapter(const ModelConfig& config, const LoraOptions& options) {
  torch::manual_seed(3);
  QwenForCausalLM model(config);
  model->attach_lora(options);
  torch::NoGradGuard no_grad;
  for (auto& [name, tensor] : model->lora_state()) tensor.copy_(torch::randn_like(tensor) * 0.2);
  return model;
}

// The base model with every adapter merged into its target: W + s B A.
QwenForCausalLM merged_copy(const QwenForCausalLM& adapted) {
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, tensor] : adapted->hf_state()) {
    if (!is_lora_parameter(name)) weights[name] = tensor.detach().clone();
  }
  const double scaling = adapted->lora_options.scaling();
  for (const auto& [name, tensor] : adapted->hf_state()) {
    const std::string suffix = ".lora_A.weight";
    if (name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string target = name.substr(0, name.size() - suffix.size());
    const torch::Tensor b = adapted->named_parameters()[target + ".lora_B.weight"];
    weights[target + ".weight"] += torch::matmul(b, tensor).detach() * scaling;
  }
  QwenForCausalLM merged(adapted->config);
  merged->load_state(weights, "merged");
  return merged;
}

TEST(Lora, AFreshAdapterLeavesTheModelsOutputUnchanged) {
  const ModelConfig config = tiny_config(ModelFamily::kQwen3, false, 8);
  torch::manual_seed(3);
  QwenForCausalLM model(config);
  const Packed batch = packed_batch(config.vocab_size);
  torch::NoGradGuard no_grad;
  const torch::Tensor before = model(batch.ids, batch.cu_seqlens);
  model->attach_lora(options_of_rank(4));
  EXPECT_TRUE(torch::equal(model(batch.ids, batch.cu_seqlens), before));
}

TEST(Lora, AdaptersCarryPeftNamesAndShapesAndOnlyTheyTrain) {
  const ModelConfig config = tiny_config(ModelFamily::kQwen3, false, 8);
  QwenForCausalLM model(config);
  model->attach_lora(options_of_rank(4));
  auto params = model->named_parameters();
  const torch::Tensor a = params["model.layers.1.self_attn.k_proj.lora_A.weight"];
  const torch::Tensor b = params["model.layers.1.self_attn.k_proj.lora_B.weight"];
  EXPECT_EQ(a.sizes(), torch::IntArrayRef({4, config.hidden_size}));
  EXPECT_EQ(b.sizes(), torch::IntArrayRef({config.num_key_value_heads * config.head_dim, 4}));
  EXPECT_TRUE(torch::equal(b, torch::zeros_like(b)));
  EXPECT_GT(a.abs().sum().item<double>(), 0.0);
  // PEFT's default init is torch Linear's: Kaiming-uniform(a = sqrt 5) = U(-1/sqrt(in), 1/sqrt(in)).
  EXPECT_LE(a.abs().max().item<double>(), 1.0 / std::sqrt(static_cast<double>(config.hidden_size)));
  // 7 targets x 2 layers x (A, B).
  EXPECT_EQ(model->lora_state().size(), 28u);
  for (const auto& item : params) {
    EXPECT_EQ(item.value().requires_grad(), is_lora_parameter(item.key())) << item.key();
  }
}

TEST(Lora, OutputsEqualTheMergedModelsForQwen2AndQwen3) {
  for (const ModelFamily family : {ModelFamily::kQwen2, ModelFamily::kQwen3}) {
    const ModelConfig config = tiny_config(family, false, 8);
    QwenForCausalLM adapted = model_with_adapter(config, options_of_rank(4, 8.0));
    QwenForCausalLM merged = merged_copy(adapted);
    const Packed batch = packed_batch(config.vocab_size);
    torch::NoGradGuard no_grad;
    const torch::Tensor got = adapted(batch.ids, batch.cu_seqlens);
    const torch::Tensor want = merged(batch.ids, batch.cu_seqlens);
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-5))
        << "family " << static_cast<int>(family) << " max diff "
        << (got - want).abs().max().item<double>();
  }
}

TEST(Lora, FusedInferenceProjectionsAddTheAdaptersToo) {
  const ModelConfig config = tiny_config(ModelFamily::kQwen3, false, 8);
  QwenForCausalLM model = model_with_adapter(config, options_of_rank(4));
  const Packed batch = packed_batch(config.vocab_size);
  torch::NoGradGuard no_grad;
  const torch::Tensor separate = model(batch.ids, batch.cu_seqlens);
  model->fuse_projections();
  EXPECT_TRUE(torch::allclose(model(batch.ids, batch.cu_seqlens), separate, 1e-6, 1e-6));
}

TEST(Lora, SwitchedOffTheModelIsExactlyItsBase) {
  const ModelConfig config = tiny_config(ModelFamily::kQwen3, false, 8);
  torch::manual_seed(3);
  QwenForCausalLM base(config);
  QwenForCausalLM adapted(config);
  {
    std::map<std::string, torch::Tensor> weights;
    for (const auto& [name, tensor] : base->hf_state()) weights[name] = tensor.detach();
    adapted->load_state(weights, "base");
  }
  adapted->attach_lora(options_of_rank(4));
  torch::NoGradGuard no_grad;
  for (auto& [name, tensor] : adapted->lora_state()) tensor.copy_(torch::randn_like(tensor));
  const Packed batch = packed_batch(config.vocab_size);
  const torch::Tensor want = base(batch.ids, batch.cu_seqlens);
  EXPECT_FALSE(torch::allclose(adapted(batch.ids, batch.cu_seqlens), want));
  {
    LoraDisabled reference;
    EXPECT_TRUE(torch::equal(adapted(batch.ids, batch.cu_seqlens), want));
    // Only this thread's forwards see the base.
    torch::Tensor other_thread;
    std::thread([&] {
      torch::NoGradGuard no_grad_there;
      other_thread = adapted(batch.ids, batch.cu_seqlens);
    }).join();
    EXPECT_FALSE(torch::allclose(other_thread, want));
  }
  EXPECT_FALSE(torch::allclose(adapted(batch.ids, batch.cu_seqlens), want));
  adapted->set_lora_enabled(false);
  EXPECT_FALSE(adapted->lora_enabled());
  EXPECT_TRUE(torch::equal(adapted(batch.ids, batch.cu_seqlens), want));
}

TEST(Lora, AdapterGradientsAreTheMergedWeightsGradientThroughTheLowRankFactors) {
  const ModelConfig config = tiny_config(ModelFamily::kQwen3, false, 8);
  const LoraOptions options = options_of_rank(3, 6.0);
  QwenForCausalLM adapted = model_with_adapter(config, options);
  QwenForCausalLM merged = merged_copy(adapted);
  const Packed batch = packed_batch(config.vocab_size);
  adapted->token_logprobs(batch.ids, batch.cu_seqlens).logprobs.sum().backward();
  merged->token_logprobs(batch.ids, batch.cu_seqlens).logprobs.sum().backward();
  auto adapted_params = adapted->named_parameters();
  auto merged_params = merged->named_parameters();
  const double s = options.scaling();
  for (const std::string target :
       {"model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.v_proj",
        "model.layers.0.self_attn.o_proj", "model.layers.1.mlp.down_proj"}) {
    const torch::Tensor g = merged_params[target + ".weight"].grad();
    const torch::Tensor a = adapted_params[target + ".lora_A.weight"];
    const torch::Tensor b = adapted_params[target + ".lora_B.weight"];
    EXPECT_TRUE(torch::allclose(b.grad(), s * torch::matmul(g, a.detach().t()), 1e-4, 1e-5))
        << target;
    EXPECT_TRUE(torch::allclose(a.grad(), s * torch::matmul(b.detach().t(), g), 1e-4, 1e-5))
        << target;
    EXPECT_FALSE(adapted_params[target + ".weight"].grad().defined()) << target;
  }
}

TEST(Lora, DropoutAppliesOnlyToForwardsThatRecordGradients) {
  const ModelConfig config = tiny_config(ModelFamily::kQwen3, false, 8);
  LoraOptions options = options_of_rank(4);
  options.dropout = 0.5;
  QwenForCausalLM model = model_with_adapter(config, options);
  const Packed batch = packed_batch(config.vocab_size);
  torch::Tensor first, second;
  {
    torch::NoGradGuard no_grad;
    first = model(batch.ids, batch.cu_seqlens);
    second = model(batch.ids, batch.cu_seqlens);
  }
  EXPECT_TRUE(torch::equal(first, second));
  EXPECT_FALSE(torch::allclose(model(batch.ids, batch.cu_seqlens).detach(), first));
}

TEST(Lora, RsloraScalesByTheSquareRootOfTheRank) {
  LoraOptions options = options_of_rank(16, 8.0);
  EXPECT_DOUBLE_EQ(options.scaling(), 0.5);
  options.use_rslora = true;
  EXPECT_DOUBLE_EQ(options.scaling(), 2.0);
}

TEST(Lora, LoadLoraStateTakesExactlyTheAdaptersAndRefusesOtherKeys) {
  const ModelConfig config = tiny_config(ModelFamily::kQwen3, false, 8);
  QwenForCausalLM source = model_with_adapter(config, options_of_rank(2));
  QwenForCausalLM target(config);
  target->attach_lora(options_of_rank(2));
  std::map<std::string, torch::Tensor> adapter;
  for (const auto& [name, tensor] : source->lora_state()) adapter[name] = tensor.detach();
  target->load_lora_state(adapter, "adapter");
  for (const auto& [name, tensor] : target->lora_state()) {
    EXPECT_TRUE(torch::equal(tensor, adapter.at(name))) << name;
  }
  auto with_base = adapter;
  with_base["model.norm.weight"] = torch::ones({config.hidden_size});
  EXPECT_THROW(target->load_lora_state(with_base, "adapter"), aspen::Error);
  auto missing = adapter;
  missing.erase(missing.begin());
  EXPECT_THROW(target->load_lora_state(missing, "adapter"), aspen::Error);
  QwenForCausalLM plain(config);
  EXPECT_THROW(plain->load_lora_state(adapter, "adapter"), aspen::Error);
}

TEST(Lora, TargetsSelectProjectionsAndExpertsAreOptIn) {
  LoraOptions options = options_of_rank(2);
  options.targets = {"v_proj", "down_proj"};
  QwenForCausalLM moe(tiny_moe_config());
  moe->attach_lora(options);
  bool expert_adapter = false;
  for (const auto& [name, tensor] : moe->lora_state()) {
    EXPECT_TRUE(name.find(".v_proj.") != std::string::npos ||
                name.find(".down_proj.") != std::string::npos)
        << name;
    expert_adapter |= name.find(".experts.") != std::string::npos;
  }
  EXPECT_FALSE(expert_adapter);
  options.experts = true;
  QwenForCausalLM with_experts(tiny_moe_config());
  with_experts->attach_lora(options);
  EXPECT_GT(with_experts->lora_state().size(), moe->lora_state().size());
}

TEST(Lora, RefusesBadOptionsNamingTheField) {
  auto message_of = [](const LoraOptions& options) {
    try {
      options.validate("train.lora");
    } catch (const aspen::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  LoraOptions options = options_of_rank(4);
  options.targets = {"qkv"};
  EXPECT_NE(message_of(options).find("train.lora.targets"), std::string::npos);
  options = options_of_rank(4);
  options.dropout = 1.0;
  EXPECT_NE(message_of(options).find("train.lora.dropout"), std::string::npos);
  options = options_of_rank(4, 0.0);
  EXPECT_NE(message_of(options).find("train.lora.alpha"), std::string::npos);
  EXPECT_NE(message_of(options_of_rank(-1)).find("train.lora.rank"), std::string::npos);

  QwenForCausalLM model(tiny_config(ModelFamily::kQwen3, false, 8));
  model->attach_lora(options_of_rank(2));
  EXPECT_THROW(model->attach_lora(options_of_rank(2)), aspen::Error);
  QwenForCausalLM mla(tiny_deepseek_config());
  EXPECT_THROW(mla->attach_lora(options_of_rank(2)), aspen::Error);
  LoraOptions mlp_only = options_of_rank(2);
  mlp_only.targets = {"gate_proj", "up_proj", "down_proj"};
  EXPECT_NO_THROW(mla->attach_lora(mlp_only));
}

}  // namespace
}  // namespace aspen::model
