// What the tests against HF transformers and PEFT (tools/python/hf_reference.py,
// peft_oracle.py) share: Aspen's packed log-probs of the parity prompts, their largest
// distance to the oracle's, and models Aspen builds with weights far from its init.
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/model/qwen_model.h"
#include "aspen/model/weights_init.h"

namespace aspen::testing {

// A scratch directory for the running test, emptied first.
inline std::string hf_parity_scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "_" + info->name();
  std::replace(name.begin(), name.end(), '/', '_');
  const std::string dir = ::testing::TempDir() + "/aspen_hf_parity_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Aspen's per-token log-probs of `prompts` packed into one batch
// (QwenForCausalLM::token_logprobs, what `aspen logprobs` runs per line), split back
// into one vector per prompt. Chunks of 128 vocabulary rows so that the chunked head's
// online softmax crosses chunk boundaries, a partial last chunk included, even on the
// 300-id models.
inline std::vector<std::vector<double>> aspen_logprobs(
    model::QwenForCausalLM& model, const std::vector<std::vector<int64_t>>& prompts) {
  std::vector<int64_t> ids, offsets = {0};
  for (const auto& prompt : prompts) {
    ids.insert(ids.end(), prompt.begin(), prompt.end());
    offsets.push_back(static_cast<int64_t>(ids.size()));
  }
  torch::NoGradGuard no_grad;
  model::LogprobHeadOptions options;
  options.chunk_size = 128;
  const torch::Tensor packed = model
                                   ->token_logprobs(torch::tensor(ids, torch::kLong),
                                                    torch::tensor(offsets, torch::kLong), options)
                                   .logprobs.to(torch::kDouble)
                                   .contiguous();
  std::vector<std::vector<double>> split;
  int64_t row = 0;
  for (const auto& prompt : prompts) {
    const int64_t scored = std::max<int64_t>(static_cast<int64_t>(prompt.size()) - 1, 0);
    const double* begin = packed.data_ptr<double>() + row;
    split.emplace_back(begin, begin + scored);
    row += scored;
  }
  EXPECT_EQ(row, packed.numel());
  return split;
}

// max |a - b| over every log-prob; b: one result per prompt, {"logprobs": [...]}. A
// length mismatch fails the test.
inline double max_logprob_diff(const std::vector<std::vector<double>>& a,
                               const std::vector<nlohmann::json>& b) {
  double diff = 0.0;
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const nlohmann::json& reference = b[i].at("logprobs");
    EXPECT_EQ(a[i].size(), reference.size()) << "prompt " << i;
    for (size_t t = 0; t < std::min(a[i].size(), reference.size()); ++t) {
      diff = std::max(diff, std::abs(a[i][t] - reference[t].get<double>()));
    }
  }
  return diff;
}

inline size_t count_logprobs(const std::vector<std::vector<double>>& logprobs) {
  size_t n = 0;
  for (const auto& row : logprobs) n += row.size();
  return n;
}

// Weights as far from Aspen's HF-style init as hf_reference.py's: norm weights and
// biases away from 1 and 0, so a checkpoint that lost or mislabelled one would show.
inline model::QwenForCausalLM aspen_built_model(const model::ModelConfig& config, uint64_t seed) {
  model::QwenForCausalLM model(config);
  model::init_weights(model, seed, /*initializer_range=*/0.15);
  torch::NoGradGuard no_grad;
  at::Generator generator = at::detail::createCPUGenerator(seed);
  for (auto& item : model->named_parameters()) {
    const std::string& name = item.key();
    const bool norm = name.size() >= 11 && name.compare(name.size() - 11, 11, "norm.weight") == 0;
    const bool bias = (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0) ||
                      model::is_frozen_parameter(name);  // DeepSeek's router bias
    if (norm) item.value().copy_(1.0 + 0.2 * torch::randn(item.value().sizes(), generator));
    if (bias) item.value().copy_(0.3 * torch::randn(item.value().sizes(), generator));
  }
  return model;
}

}  // namespace aspen::testing
