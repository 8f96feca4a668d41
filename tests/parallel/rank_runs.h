// The `aspen train` configurations the multi-rank tests run (as key=value overrides),
// shared so every such test trains the same small models, and the check that a
// multi-rank run trained like a one-process run.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "aspen/io/model_dir.h"
#include "aspen/io/peft_adapter.h"
#include "aspen/pipeline/rl_run.h"

namespace aspen::testing {

using namespace aspen::io;
using namespace aspen::parallel;
using namespace aspen::pipeline;

// A 1-layer model that SFT brings to 12-30% on 1-digit addition, so rewards vary within
// groups and updates have a real gradient (not Adam-amplified rounding noise). Seed 2:
// the fused log-prob head (kernels/logprob_chunk_cpu.h) changed the SFT's fp32
// rounding, and with the default seed every group of all three iterations then scored
// alike (zero advantages, zero gradient); with seed 2 two of the three have gradients
// (norms 0.82 and 0.60), which expect_same_training requires.
inline std::string tiny_rank_run(const std::string& extra = "") {
  return "model.hidden_size=32 model.num_layers=1 model.head_dim=8 model.intermediate_size=64 "
         "train.seed=2 "
         "train.sft_steps=300 train.sft_lr=5e-3 train.sft_batch_size=8 train.iterations=3 "
         "rollout.n=4 rollout.prompts_per_iteration=4 data.train_size=200 data.eval_size=16 "
         "'data.task_options={digits: 1}' logging.console=false logging.eval_every=0 "
         "train.lr=1e-3 " +
         extra;
}

// A 2-layer model on 2-digit addition whose vocabulary is padded to 320 rows (the
// built-in tokenizer has 259 tokens), so TP 2 can split heads, MLP and vocabulary.
inline std::string tp_rank_run(const std::string& extra = "") {
  return "model.hidden_size=64 model.num_layers=2 model.head_dim=16 model.intermediate_size=128 "
         "model.vocab_multiple=64 train.sft_steps=500 train.sft_batch_size=16 train.sft_lr=5e-3 "
         "train.iterations=3 rollout.n=4 rollout.prompts_per_iteration=4 data.train_size=2000 "
         "data.eval_size=16 logging.console=false logging.eval_every=0 train.lr=1e-3 "
         "algorithm.kl_coef=0.01 " +
         extra;
}

// Final weights that may differ by AdamW sign flips: an element whose gradient sits at
// rounding level gets a step of about lr whose sign is the rounding's, so a run that
// sums in another order can end up to 2 lr per update away on it. Which elements flip
// depends on how the machine's BLAS rounds each shape, so any pair may show a few: the
// CI machine of 2026-12-05 ended one of PipelineStagesReshardIntoAColocatedTensor-
// ParallelInstance's 94,592 elements 1.4e-4 away (lr 1e-3) where this Xeon and an EPYC
// had none. So every comparison allows 1 element in 10,000 beyond the tolerance, each
// within 2 lr per optimizer step of the run; a wrong update (a lost gradient share, a
// wrong denominator) moves most elements, and the gradient norms are compared at 1e-4.
struct RoundingFlips {
  double max_fraction = 1e-4;
  double max_diff = 0.0;  // 0: 2 lr per optimizer step of the RL run (its metrics' lr)
};

// 2 lr summed over the optimizer steps of the RL run in `dir` (its config's
// train.epochs times its mini-batches per iteration, one unless mini_batch_size is set).
inline double adamw_flip_bound(const std::string& dir) {
  nlohmann::json config;
  std::ifstream(dir + "/config.json") >> config;
  const auto& train = config.at("train");
  const int64_t epochs = train.value("epochs", int64_t{1});
  const int64_t mini_batch = train.value("mini_batch_size", int64_t{0});
  double bound = 0.0;
  for (const auto& line : read_rl_metrics(dir)) {
    const int64_t rows = line.value("trained_rows", int64_t{0});
    const int64_t mini_batches = mini_batch > 0 ? (rows + mini_batch - 1) / mini_batch : 1;
    bound += 2.0 * line.at("lr").get<double>() * static_cast<double>(epochs * mini_batches);
  }
  return bound;
}

// `actual` holds the tensors of `expected`, each element within `atol` (+1e-4 relative)
// except at most `flips.max_fraction` of all elements, each within `max_diff`.
inline void expect_weights_alike(const std::map<std::string, torch::Tensor>& expected,
                                 const std::map<std::string, torch::Tensor>& actual, double atol,
                                 RoundingFlips flips) {
  ASSERT_EQ(actual.size(), expected.size());
  int64_t elements = 0;
  int64_t flipped = 0;
  for (const auto& [name, tensor] : expected) {
    ASSERT_TRUE(actual.count(name)) << name;
    const torch::Tensor diff = (actual.at(name) - tensor).abs();
    // allclose's test, negated so that a NaN counts as beyond.
    const torch::Tensor beyond = (diff <= atol + 1e-4 * tensor.abs()).logical_not();
    elements += tensor.numel();
    flipped += beyond.sum().item<int64_t>();
    const torch::Tensor flip_beyond = (diff <= flips.max_diff).logical_not().logical_and(beyond);
    EXPECT_FALSE(flip_beyond.any().item<bool>())
        << name << ": max |diff| " << diff.max().item<double>() << " beyond " << flips.max_diff;
  }
  EXPECT_LE(static_cast<double>(flipped), flips.max_fraction * static_cast<double>(elements))
      << flipped << " of " << elements << " weight elements differ by more than " << atol;
}

// The run in `many` (on `ranks` ranks) trained like the one in `one`: the same samples
// (sampling is seeded per group and sample, whichever rank runs it), the same update
// (global denominators, summed gradients) and final weights within 1e-4.
// `weight_atol`: the final weights' absolute tolerance (1e-4 unless a test says why);
// `flips`: the elements allowed beyond it (RoundingFlips).
inline void expect_same_training(const std::string& one, const std::string& many, int ranks,
                                 double weight_atol = 1e-4, RoundingFlips flips = {}) {
  const auto a = read_rl_metrics(one);
  const auto b = read_rl_metrics(many);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), a.size());
  double gradient = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i]["reward_mean"], a[i]["reward_mean"]) << "iteration " << i;
    EXPECT_EQ(b[i]["response_length_mean"], a[i]["response_length_mean"]) << "iteration " << i;
    EXPECT_EQ(b[i]["trained_rows"], a[i]["trained_rows"]) << "iteration " << i;
    EXPECT_EQ(b[i]["trained_tokens"], a[i]["trained_tokens"]) << "iteration " << i;
    EXPECT_NEAR(b[i]["grad_norm"].get<double>(), a[i]["grad_norm"].get<double>(),
                1e-4 * (1.0 + a[i]["grad_norm"].get<double>()))
        << "iteration " << i;
    EXPECT_EQ(b[i]["ranks"], ranks);
    gradient += a[i]["grad_norm"].get<double>();
  }
  EXPECT_GT(gradient, 0.1) << "the comparison needs updates that move the weights";
  if (flips.max_diff <= 0.0) flips.max_diff = adamw_flip_bound(one);
  // A LoRA run's final/ is its PEFT adapter (pipeline/lora_policy.h): the adapters are
  // what trained; its base/ is the warmed-up base, the same by the SFT's own check.
  const bool lora = std::filesystem::exists(one + "/final/" + kPeftWeightsFile);
  const auto wa = lora ? read_peft_adapter(one + "/final").tensors
                       : load_model_weights(one + "/final");
  const auto wb = lora ? read_peft_adapter(many + "/final").tensors
                       : load_model_weights(many + "/final");
  expect_weights_alike(wa, wb, weight_atol, flips);
}

}  // namespace aspen::testing
