// The weight delta codec (dock/weight_delta.h): a delta applied to the old set gives
// the new set bit for bit, for every dtype and for values arithmetic would not keep
// (NaN payloads, signed zeros, infinities, subnormals); an AdamW-sized change codes in
// far fewer bytes than the set; a tensor that does not compress is sent raw; sets that
// differ in their tensors have no delta; held weights that do not match are refused.
#include "aspen/dock/weight_delta.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <limits>

#include "aspen/util/error.h"

namespace aspen::dock {
namespace {

std::map<std::string, torch::Tensor> by_name(const WeightSet& set) {
  return {set.tensors.begin(), set.tensors.end()};
}

void expect_bit_equal(const WeightSet& got, const WeightSet& want) {
  EXPECT_EQ(got.version, want.version);
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    const torch::Tensor& a = got.tensors[i].second;
    const torch::Tensor& b = want.tensors[i].second;
    EXPECT_EQ(got.tensors[i].first, want.tensors[i].first);
    ASSERT_EQ(a.scalar_type(), b.scalar_type()) << want.tensors[i].first;
    ASSERT_EQ(a.sizes(), b.sizes()) << want.tensors[i].first;
    // Bytes, not values: NaN != NaN and -0 == +0 would hide a difference. An empty
    // tensor has no data pointer to compare (memcmp of null is undefined even for 0).
    if (b.numel() == 0) continue;
    EXPECT_EQ(std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                          a.numel() * a.element_size()),
              0)
        << want.tensors[i].first;
  }
}

// Version 1 and a version 2 moved as one AdamW step at lr 1e-6 moves fp32 weights
// (about 1e-6 per element), with every other kind of tensor beside.
std::pair<WeightSet, WeightSet> stepped_sets() {
  torch::manual_seed(5);
  WeightSet old_set, new_set;
  old_set.version = 1;
  new_set.version = 2;
  auto add = [&](const std::string& name, torch::Tensor before, torch::Tensor after) {
    old_set.tensors.emplace_back(name, before);
    new_set.tensors.emplace_back(name, after);
  };
  // More than one frame (kDeltaFrameElements), the last one partial.
  torch::Tensor big = torch::randn({kDeltaFrameElements + 1000}) * 0.02;
  add("big.weight", big, big + torch::randn_like(big) * 1e-6);
  torch::Tensor w = torch::randn({64, 48}) * 0.02;
  add("layer.weight", w, w + torch::randn_like(w) * 1e-6);
  torch::Tensor bf = torch::randn({33, 17}).to(torch::kBFloat16);
  add("bf16.weight", bf, (bf.to(torch::kFloat) * 1.01).to(torch::kBFloat16));
  add("steps", torch::arange(7, torch::kInt64), torch::arange(7, torch::kInt64) * 3);
  add("unchanged", torch::ones({5, 5}), torch::ones({5, 5}));
  add("empty", torch::empty({0, 4}), torch::empty({0, 4}));
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  torch::Tensor special_old = torch::tensor({0.0f, 1.0f, inf, nan, tiny, -2.0f});
  torch::Tensor special_new = torch::tensor({-0.0f, nan, -inf, 3.0f, 2 * tiny, -2.0f});
  // A NaN with another payload: equal as a value class, different as bits.
  reinterpret_cast<uint32_t*>(special_new.data_ptr())[1] = 0x7fc00123u;
  add("special", special_old, special_new);
  // Strided (a transposed view): coded from its values in row-major order.
  torch::Tensor t = torch::randn({6, 4});
  add("strided", t.t(), (t * 2).t());
  return {old_set, new_set};
}

TEST(WeightDelta, AppliedToTheOldSetGivesTheNewSetBitForBit) {
  auto [old_set, new_set] = stepped_sets();
  const std::optional<WeightDelta> delta = encode_weight_delta(old_set, new_set);
  ASSERT_TRUE(delta.has_value());
  EXPECT_EQ(delta->from_version, 1);
  EXPECT_EQ(delta->to_version, 2);
  ASSERT_EQ(delta->tensors.size(), new_set.tensors.size());
  const std::shared_ptr<WeightSet> applied = apply_weight_delta(*delta, by_name(old_set));
  expect_bit_equal(*applied, new_set);
  for (const auto& [name, tensor] : applied->tensors) EXPECT_TRUE(tensor.device().is_cpu()) << name;
}

TEST(WeightDelta, AnAdamWSizedFp32StepCodesInAFractionOfTheSetsBytes) {
  auto [old_set, new_set] = stepped_sets();
  const std::optional<WeightDelta> delta = encode_weight_delta(old_set, new_set);
  ASSERT_TRUE(delta.has_value());
  // The high two bytes of every element are unchanged: at most about half the bytes.
  EXPECT_EQ(delta->tensors[0].coding, DeltaCoding::kXorZstd);
  EXPECT_LT(delta->tensors[0].payload.numel(), new_set.tensors[0].second.numel() * 4 / 2);
  // An unchanged tensor costs a frame header, not its bytes.
  EXPECT_EQ(delta->tensors[4].name, "unchanged");
  EXPECT_LE(delta->tensors[4].payload.numel(), 25 * 4);
  EXPECT_LT(delta->bytes(), old_set.bytes() / 2);
}

TEST(WeightDelta, ATensorThatDoesNotCompressIsSentRaw) {
  torch::manual_seed(9);
  WeightSet old_set, new_set;
  old_set.tensors = {{"noise", torch::randint(0, 1 << 30, {4096}, torch::kInt32)}};
  new_set.tensors = {{"noise", torch::randint(0, 1 << 30, {4096}, torch::kInt32)}};
  new_set.version = 1;
  const std::optional<WeightDelta> delta = encode_weight_delta(old_set, new_set);
  ASSERT_TRUE(delta.has_value());
  EXPECT_EQ(delta->tensors[0].coding, DeltaCoding::kRaw);
  EXPECT_EQ(delta->bytes(), new_set.bytes());
  expect_bit_equal(*apply_weight_delta(*delta, by_name(old_set)), new_set);
}

TEST(WeightDelta, SetsWithOtherTensorsHaveNoDelta) {
  WeightSet a;
  a.tensors = {{"w", torch::zeros({2, 3})}};
  WeightSet renamed;
  renamed.tensors = {{"v", torch::zeros({2, 3})}};
  WeightSet reshaped;
  reshaped.tensors = {{"w", torch::zeros({3, 2})}};
  WeightSet retyped;
  retyped.tensors = {{"w", torch::zeros({2, 3}, torch::kBFloat16)}};
  WeightSet longer = a;
  longer.tensors.emplace_back("x", torch::zeros({1}));
  for (const WeightSet* other : {&renamed, &reshaped, &retyped, &longer}) {
    EXPECT_FALSE(encode_weight_delta(a, *other).has_value());
  }
}

TEST(WeightDelta, HeldWeightsThatDoNotMatchTheDeltaAreRefused) {
  auto [old_set, new_set] = stepped_sets();
  const WeightDelta delta = *encode_weight_delta(old_set, new_set);
  std::map<std::string, torch::Tensor> missing = by_name(old_set);
  missing.erase("layer.weight");
  EXPECT_THROW(apply_weight_delta(delta, missing), Error);
  std::map<std::string, torch::Tensor> resized = by_name(old_set);
  resized["layer.weight"] = torch::zeros({64, 47});
  EXPECT_THROW(apply_weight_delta(delta, resized), Error);
  WeightDelta corrupt = delta;
  corrupt.tensors[1].payload = delta.tensors[1].payload.clone();
  corrupt.tensors[1].payload.narrow(0, 0, 4).fill_(0xff);  // the frame's magic number
  EXPECT_THROW(apply_weight_delta(corrupt, by_name(old_set)), Error);
}

}  // namespace
}  // namespace aspen::dock
