#include "aspen/model/fused_projection.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "aspen/util/error.h"

namespace aspen::model {
namespace {

// q/k/v-like members: one input width, three output widths, with biases.
std::vector<torch::nn::Linear> three_linears(bool bias = true) {
  torch::manual_seed(7);
  return {torch::nn::Linear(torch::nn::LinearOptions(16, 12).bias(bias)),
          torch::nn::Linear(torch::nn::LinearOptions(16, 4).bias(bias)),
          torch::nn::Linear(torch::nn::LinearOptions(16, 4).bias(bias))};
}

std::vector<torch::Tensor> separate_outputs(const std::vector<torch::nn::Linear>& members,
                                            const torch::Tensor& x) {
  std::vector<torch::Tensor> out;
  for (auto m : members) out.push_back(m->forward(x));  // a copy of the holder: forward is not const
  return out;
}

TEST(FusedProjection, OneGemmGivesEachMembersOutputAndKeepsTheirValues) {
  auto members = three_linears();
  std::vector<torch::Tensor> before;
  for (const auto& m : members) before.push_back(m->weight.detach().clone());
  const torch::Tensor x = torch::randn({5, 16});
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> want = separate_outputs(members, x);

  FusedProjection fused;
  EXPECT_FALSE(fused.intact());
  fused.fuse(members);
  ASSERT_TRUE(fused.usable_for_inference());
  const std::vector<torch::Tensor> got = fused.split(fused.forward(x));
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < members.size(); ++i) {
    EXPECT_TRUE(torch::equal(members[i]->weight, before[i])) << "member " << i;
    EXPECT_EQ(got[i].sizes(), want[i].sizes());
    EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-6, 1e-6)) << "member " << i;
  }
  // The members are rows of one matrix: consecutive in memory.
  EXPECT_EQ(static_cast<const float*>(members[1]->weight.data_ptr()),
            static_cast<const float*>(members[0]->weight.data_ptr()) + 12 * 16);
}

TEST(FusedProjection, InPlaceUpdatesOfAMemberReachTheFusedGemm) {
  auto members = three_linears();
  FusedProjection fused;
  fused.fuse(members);
  const torch::Tensor x = torch::randn({3, 16});
  torch::NoGradGuard no_grad;
  members[1]->weight.copy_(torch::ones({4, 16}));  // as a weight publish does
  members[2]->bias.add_(1.0);                       // as an optimizer step does
  ASSERT_TRUE(fused.intact());
  const std::vector<torch::Tensor> got = fused.split(fused.forward(x));
  const std::vector<torch::Tensor> want = separate_outputs(members, x);
  for (size_t i = 0; i < members.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i], want[i], 1e-6, 1e-6)) << "member " << i;
}

TEST(FusedProjection, ADtypeChangeUnfusesAndFuseRestoresTheLayout) {
  auto members = three_linears(/*bias=*/false);
  FusedProjection fused;
  fused.fuse(members);
  members[0]->to(torch::kDouble);
  EXPECT_FALSE(fused.intact());
  EXPECT_FALSE(fused.usable_for_inference());
  for (auto& m : members) m->to(torch::kDouble);
  fused.fuse(members);
  ASSERT_TRUE(fused.intact());
  const torch::Tensor x = torch::randn({2, 16}, torch::kDouble);
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> got = fused.split(fused.forward(x));
  EXPECT_EQ(got[0].scalar_type(), torch::kDouble);
  EXPECT_TRUE(torch::allclose(got[2], members[2]->forward(x)));
  fused.fuse(members);  // idempotent: the layout, and so the pointers, stay
  EXPECT_TRUE(fused.intact());
}

TEST(FusedProjection, NotUsedWhileAGradientIsWantedAndMembersStillTrain) {
  auto members = three_linears();
  auto reference = three_linears();  // same seed: same values, never fused
  FusedProjection fused;
  fused.fuse(members);
  EXPECT_FALSE(fused.usable_for_inference());  // grad mode on, weights require grad
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(fused.usable_for_inference());
  }
  const torch::Tensor x = torch::randn({4, 16});
  torch::Tensor loss_fused, loss_ref;
  for (size_t i = 0; i < 3; ++i) {
    const torch::Tensor a = members[i]->forward(x).square().sum();
    const torch::Tensor b = reference[i]->forward(x).square().sum();
    loss_fused = loss_fused.defined() ? loss_fused + a : a;
    loss_ref = loss_ref.defined() ? loss_ref + b : b;
  }
  loss_fused.backward();
  loss_ref.backward();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(torch::allclose(members[i]->weight.grad(), reference[i]->weight.grad()));
    EXPECT_TRUE(torch::allclose(members[i]->bias.grad(), reference[i]->bias.grad()));
  }
  // An optimizer step updates the parameters in place: the layout survives it.
  torch::optim::SGD sgd(std::vector<torch::Tensor>{members[0]->weight, members[1]->weight},
                        torch::optim::SGDOptions(0.1));
  sgd.step();
  EXPECT_TRUE(fused.intact());
}

TEST(FusedProjection, MembersThatDoNotFitAreErrorsNamingTheMember) {
  FusedProjection fused;
  EXPECT_THROW(fused.fuse({}), Error);
  auto members = three_linears();
  members.push_back(torch::nn::Linear(torch::nn::LinearOptions(8, 4)));
  try {
    fused.fuse(members);
    FAIL() << "a member of another input width was fused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("member 3"), std::string::npos) << e.what();
  }
  auto mixed = three_linears();
  mixed.push_back(torch::nn::Linear(torch::nn::LinearOptions(16, 4).bias(false)));
  EXPECT_THROW(fused.fuse(mixed), Error);
  EXPECT_FALSE(fused.intact());
}

}  // namespace
}  // namespace aspen::model
