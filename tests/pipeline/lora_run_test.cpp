// RL with LoRA (train.lora, pipeline/lora_policy.h): only the adapters train, the
// reference is the base (no copy saved), the final directory is a PEFT adapter over
// the base it applies to, and a resumed run continues exactly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "aspen/io/model_dir.h"
#include "aspen/io/peft_adapter.h"
#include "aspen/pipeline/rl_run.h"
#include "aspen/util/error.h"
#include "resumed_runs.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

TrainConfig lora_config(std::vector<std::string> extra = {}) {
  std::vector<std::string> overrides = {
      "train.lora.rank=4",      "train.lora.alpha=8",     "train.lr=1e-3",
      "algorithm.kl_coef=0.01", "checkpoint.every=2",     "checkpoint.keep_last=0",
      "train.lora.export_merged=true",
      // The tiny run's answers all score 0 after its short warm-up: DAPO's overlong
      // shaping scores them by length, so the groups carry a learning signal.
      "rollout.max_tokens=8", "algorithm.overlong_buffer=6", "algorithm.overlong_penalty=1.0"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return testing::tiny_run_config(overrides);
}

TEST(LoraRun, TrainsTheAdaptersOnAFrozenBaseAndExportsThemForPeft) {
  const TrainConfig config = lora_config();
  const std::string out = ::testing::TempDir() + "/aspen_lora_run";
  fs::remove_all(out);
  RlSetup setup = build_rl_setup(config);
  run_rl(config, setup, RunOptions{out});

  // The base of the RL phase (saved with the first checkpoint) is the exported base.
  const auto checkpoint = load_model_weights(out + "/checkpoints/iter_000002/policy");
  const auto base = load_model_weights(out + "/final/base");
  for (const auto& [name, tensor] : base) {
    EXPECT_TRUE(torch::equal(tensor, checkpoint.at(name))) << name << " changed during RL";
  }
  EXPECT_FALSE(fs::exists(out + "/checkpoints/iter_000002/reference.safetensors"))
      << "the reference is the base: no copy of its own";

  const LoraAdapter adapter = read_peft_adapter(out + "/final");
  EXPECT_EQ(adapter.config.rank, 4);
  EXPECT_DOUBLE_EQ(adapter.config.alpha, 8.0);
  ASSERT_EQ(adapter.tensors.size(), checkpoint.size() - base.size());
  auto final_policy = setup.model->named_parameters();
  double trained_b = 0.0;
  for (const auto& [name, tensor] : adapter.tensors) {
    EXPECT_TRUE(torch::equal(tensor, final_policy[name].detach())) << name;
    if (name.find(".lora_B.") != std::string::npos) trained_b += tensor.abs().sum().item<double>();
  }
  EXPECT_GT(trained_b, 0.0) << "B starts at zero: RL must have moved it";

  // final/merged computes what base + adapter computes.
  const auto merged = load_model_weights(out + "/final/merged");
  for (const auto& [name, tensor] : setup.model->merged_state()) {
    EXPECT_TRUE(torch::allclose(merged.at(name), tensor)) << name;
  }
}

TEST(LoraRun, ResumesExactlyLikeAnUninterruptedRun) {
  // Two epochs of mini-batches: the old log-probs are recomputed by the trainer. With one
  // step they would be the rollout's, whose last bits depend on how the rollout engine
  // happened to batch the rows (tests/pipeline/resume_test.cpp says the same).
  const TrainConfig config =
      lora_config({"train.iterations=4", "train.lora.export_merged=false", "train.epochs=2",
                   "train.mini_batch_size=8"});
  const std::string full = ::testing::TempDir() + "/aspen_lora_resume_full";
  const std::string resumed = ::testing::TempDir() + "/aspen_lora_resume_resumed";
  fs::remove_all(full);
  fs::remove_all(resumed);
  {
    RlSetup setup = build_rl_setup(config);
    run_rl(config, setup, RunOptions{full});
  }
  testing::resume_after_iteration_two(config, full, resumed);
  const auto expected = testing::metrics_without_timing(full);
  const auto actual = testing::metrics_without_timing(resumed);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(actual[i], expected[i]) << "line " << i;
  const LoraAdapter a = read_peft_adapter(full + "/final");
  const LoraAdapter b = read_peft_adapter(resumed + "/final");
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, tensor] : a.tensors) {
    EXPECT_TRUE(torch::equal(tensor, b.tensors.at(name))) << name;
  }
}

TEST(LoraRun, RefusesAnUnknownTargetBeforeAnyWork) {
  try {
    lora_config({"train.lora.targets=[qkv_proj]"});
    FAIL() << "an unknown target must be refused";
  } catch (const aspen::Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.lora.targets"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace aspen::pipeline
