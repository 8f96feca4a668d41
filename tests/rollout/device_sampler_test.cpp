// The device sampler, run on CPU tensors, against the host sampler: the same tokens one
// for one and the same log-probs, for every sampling mode, alone and mixed in a batch.
#include "aspen/rollout/device_sampler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

namespace aspen::rollout {
namespace {

struct Mode {
  std::string name;
  SamplingParams params;
};

std::vector<Mode> sampling_modes() {
  std::vector<Mode> modes(8);
  modes[0].name = "greedy";
  modes[0].params.temperature = 0.0;
  modes[1].name = "temperature 1";
  modes[2].name = "temperature 0.7";
  modes[2].params.temperature = 0.7;
  modes[3].name = "top-k 50";
  modes[3].params.top_k = 50;
  modes[4].name = "top-p 0.9";
  modes[4].params.top_p = 0.9;
  modes[5].name = "min-p 0.05";
  modes[5].params.min_p = 0.05;
  modes[6].name = "all filters";
  modes[6].params.temperature = 0.8;
  modes[6].params.top_k = 100;
  modes[6].params.top_p = 0.95;
  modes[6].params.min_p = 0.02;
  modes[7].name = "top-k 1";
  modes[7].params.top_k = 1;
  return modes;
}

// Rows of `params` with their own seeds and steps; every third suppresses some ids,
// the top one among them.
std::vector<SamplingRow> rows_of(const SamplingParams& params, const torch::Tensor& logits,
                                 uint64_t seed) {
  std::vector<SamplingRow> rows;
  const torch::Tensor best = logits.argmax(1);
  for (int64_t r = 0; r < logits.size(0); ++r) {
    SamplingRow row{&params, seed * 1000 + static_cast<uint64_t>(r), r % 7, {}};
    if (r % 3 == 0) row.suppressed = {best[r].item<TokenId>(), 5, 17, -1, 1 << 30};
    rows.push_back(row);
  }
  return rows;
}

void expect_same_draws(const torch::Tensor& logits, const std::vector<SamplingRow>& rows,
                       const std::string& what) {
  const std::vector<SampledToken> host = sample_tokens(logits, rows);
  const std::vector<SampledToken> device = sample_tokens_on_device(logits, rows);
  ASSERT_EQ(host.size(), device.size());
  for (size_t r = 0; r < host.size(); ++r) {
    EXPECT_EQ(device[r].token, host[r].token) << what << ", row " << r;
    EXPECT_NEAR(device[r].policy_logprob, host[r].policy_logprob, 1e-5) << what << ", row " << r;
    EXPECT_NEAR(device[r].sampling_logprob, host[r].sampling_logprob, 1e-5)
        << what << ", row " << r;
  }
}

TEST(DeviceSampler, DrawsTheHostSamplersTokensInEveryMode) {
  torch::manual_seed(11);
  uint64_t seed = 1;
  for (const Mode& mode : sampling_modes()) {
    for (int trial = 0; trial < 4; ++trial) {
      const torch::Tensor logits = torch::randn({48, 3000}) * 3.0;
      expect_same_draws(logits, rows_of(mode.params, logits, seed++), mode.name);
    }
  }
}

// Every mode in one batch: the per-row parameters stay with their rows.
TEST(DeviceSampler, MixedBatchMatchesTheHostSampler) {
  torch::manual_seed(12);
  const std::vector<Mode> modes = sampling_modes();
  const torch::Tensor logits = torch::randn({64, 2500}) * 2.5;
  std::vector<SamplingRow> rows;
  for (int64_t r = 0; r < logits.size(0); ++r) {
    rows.push_back({&modes[r % modes.size()].params, static_cast<uint64_t>(r) * 31, r, {}});
  }
  rows[3].suppressed = {0, 1, 2};
  expect_same_draws(logits, rows, "mixed batch");
}

// Tied logits: top-k and top-p cut among equal values by the lower id, as the host does;
// bf16 logits are read as fp32 on both sides.
TEST(DeviceSampler, TiesAndBf16LogitsMatchTheHostSampler) {
  torch::manual_seed(13);
  const torch::Tensor tied = (torch::randn({32, 400}) * 2.0).round() / 2.0;
  SamplingParams top_k;
  top_k.top_k = 7;
  SamplingParams top_p;
  top_p.top_p = 0.5;
  expect_same_draws(tied, rows_of(top_k, tied, 5), "tied logits, top-k 7");
  expect_same_draws(tied, rows_of(top_p, tied, 6), "tied logits, top-p 0.5");
  const torch::Tensor bf16 = (torch::randn({16, 1000}) * 3.0).to(torch::kBFloat16);
  SamplingParams all;
  all.temperature = 0.9;
  all.top_p = 0.8;
  all.top_k = 40;
  expect_same_draws(bf16, rows_of(all, bf16, 7), "bf16 logits");
}

TEST(DeviceSampler, RejectsOneRowCountForAnother) {
  SamplingParams params;
  EXPECT_THROW(sample_tokens_on_device(torch::zeros({2, 5}), {SamplingRow{&params, 0, 0, {}}}),
               c10::Error);
}

}  // namespace
}  // namespace aspen::rollout
