// share_base_weights: a second model over the same memory as the first (what `aspen
// serve --lora` builds per adapter), fused projections included, whose adapters are
// its own.
#include "aspen/model/shared_base.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "aspen/model/weights_init.h"
#include "aspen/util/error.h"
#include "tiny_configs.h"

namespace aspen::model {
namespace {

using testing::NamedConfig;

class SharedBase : public ::testing::TestWithParam<NamedConfig> {};

torch::Tensor packed_logits(QwenForCausalLM& model, const torch::Tensor& ids) {
  const torch::Tensor cu = torch::tensor({int64_t{0}, ids.size(0)}, torch::kInt64);
  return torch::matmul(model(ids, cu), model->lm_head_weight().t());
}

TEST_P(SharedBase, EveryTensorIsTheBasesMemoryEvenAfterBothFuseTheirProjections) {
  QwenForCausalLM base = make_random_model(GetParam().config, /*seed=*/3);
  base->fuse_projections();  // as the base's rollout engine does when it is built
  QwenForCausalLM shared = share_base_weights(base);
  shared->fuse_projections();  // as the adapter's engine does: adopts, does not copy
  const auto base_params = base->named_parameters(/*recurse=*/true);
  const auto shared_params = shared->named_parameters(/*recurse=*/true);
  ASSERT_EQ(base_params.size(), shared_params.size());
  for (const auto& item : base_params) {
    EXPECT_EQ(shared_params[item.key()].data_ptr(), item.value().data_ptr()) << item.key();
  }
  const auto base_buffers = base->named_buffers(/*recurse=*/true);
  for (const auto& item : shared->named_buffers(/*recurse=*/true)) {
    EXPECT_EQ(item.value().data_ptr(), base_buffers[item.key()].data_ptr()) << item.key();
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::tensor(std::vector<int64_t>{1, 7, 3, 30, 2}, torch::kInt64);
  EXPECT_TRUE(torch::equal(packed_logits(shared, ids), packed_logits(base, ids)));
}

TEST_P(SharedBase, AdaptersAttachedToTheSharedModelLeaveTheBaseAsItWas) {
  QwenForCausalLM base = make_random_model(GetParam().config, /*seed=*/4);
  base->fuse_projections();
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::tensor(std::vector<int64_t>{5, 9, 1, 44}, torch::kInt64);
  const torch::Tensor before = packed_logits(base, ids);
  QwenForCausalLM shared = share_base_weights(base);
  LoraOptions options;
  options.rank = 2;
  options.targets = {"q_proj", "v_proj", "down_proj"};
  shared->attach_lora(options);
  for (auto& [name, tensor] : shared->lora_state()) tensor.normal_(0, 0.5);
  shared->fuse_projections();
  EXPECT_FALSE(base->has_lora());
  EXPECT_TRUE(torch::equal(packed_logits(base, ids), before));
  EXPECT_FALSE(torch::allclose(packed_logits(shared, ids), before, 1e-3, 1e-3));
  EXPECT_EQ(shared->model->layers[0]->named_parameters()["self_attn.q_proj.weight"].data_ptr(),
            base->model->layers[0]->named_parameters()["self_attn.q_proj.weight"].data_ptr());
}

INSTANTIATE_TEST_SUITE_P(Configs, SharedBase, ::testing::ValuesIn(testing::tiny_configs()),
                         [](const auto& info) { return info.param.name; });

TEST(SharedBaseRefusal, ABaseWithAdaptersIsRefusedByName) {
  QwenForCausalLM base = make_random_model(testing::tiny_configs()[0].config, /*seed=*/5);
  LoraOptions options;
  options.rank = 2;
  base->attach_lora(options);
  try {
    share_base_weights(base);
    FAIL() << "expected an aspen::Error";
  } catch (const Error& error) {
    EXPECT_EQ(error.input(), "shared base model");
  }
}

}  // namespace
}  // namespace aspen::model
