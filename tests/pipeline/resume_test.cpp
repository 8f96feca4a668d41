// --resume continues a run exactly: a run interrupted after its checkpoint at
// iteration 2 and resumed from it writes the same metrics and ends with the same
// weights as the uninterrupted run. PPO with an adaptive KL-in-reward controller,
// two epochs of shuffled mini-batches: every piece of saved state matters (policy,
// reference, critic, both optimizers, prompt order and RNG, KL coefficient).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>

#include "aspen/io/model_dir.h"
#include "aspen/pipeline/checkpoint.h"
#include "aspen/pipeline/checkpoint_manifest.h"
#include "aspen/pipeline/rl_run.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "checkpoint_state_fixture.h"
#include "resumed_runs.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

TrainConfig resume_config() {
  return testing::tiny_run_config(
      {"logging.eval_every=1", "algorithm.name=ppo", "algorithm.kl_in_reward=true",
       "algorithm.kl_ctrl=adaptive", "algorithm.kl_coef=0.01", "train.epochs=2",
       "train.mini_batch_size=8", "checkpoint.every=2", "checkpoint.keep_last=0"});
}

TEST(Resume, ContinuesExactlyLikeAnUninterruptedRun) {
  const TrainConfig config = resume_config();
  const std::string full = ::testing::TempDir() + "/aspen_resume_full";
  const std::string resumed = ::testing::TempDir() + "/aspen_resume_resumed";
  fs::remove_all(full);
  fs::remove_all(resumed);
  {
    RlSetup setup = build_rl_setup(config);
    run_rl(config, setup, RunOptions{full});
  }
  ASSERT_TRUE(fs::exists(full + "/checkpoints/iter_000002/state.json"));
  ASSERT_TRUE(fs::exists(full + "/checkpoints/iter_000004/critic_optimizer.safetensors"));

  // The interrupted run: what the full run had on disk right after iteration 2
  // (its metrics file then held the SFT/eval lines and two RL lines; the resume
  // must also cut the two later lines away).
  testing::resume_after_iteration_two(config, full, resumed);

  const auto expected = testing::metrics_without_timing(full);
  const auto actual = testing::metrics_without_timing(resumed);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(actual[i], expected[i]) << "line " << i;

  const auto a = load_model_weights(full + "/final");
  const auto b = load_model_weights(resumed + "/final");
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, tensor] : a) EXPECT_TRUE(torch::equal(tensor, b.at(name))) << name;
}

TEST(Resume, AsyncEngineContinuesLikeAnUninterruptedRun) {
  // eta 0 makes the asynchronous engine deterministic (each batch is exactly the
  // groups admitted at its version); the groups admitted but not trained when the
  // checkpoint was written are admitted again on resume, with the same seeds.
  const TrainConfig config = testing::tiny_run_config(
      {"pipeline.mode=async", "pipeline.max_staleness=0", "pipeline.instances=2",
       "checkpoint.every=2", "checkpoint.keep_last=0"});
  const std::string full = ::testing::TempDir() + "/aspen_resume_async_full";
  const std::string resumed = ::testing::TempDir() + "/aspen_resume_async_resumed";
  fs::remove_all(full);
  fs::remove_all(resumed);
  {
    RlSetup setup = build_rl_setup(config);
    run_rl(config, setup, RunOptions{full});
  }
  testing::resume_after_iteration_two(config, full, resumed);
  const auto expected = read_rl_metrics(full);
  const auto actual = read_rl_metrics(resumed);
  ASSERT_EQ(actual.size(), 4u);
  ASSERT_EQ(expected.size(), 4u);
  for (size_t i = 0; i < expected.size(); ++i) {
    for (const char* key : {"trained_rows", "trained_tokens", "policy_version"}) {
      EXPECT_EQ(actual[i][key], expected[i][key]) << key << " at " << i;
    }
    // The same groups (streamed in the order they finished, which timing decides).
    auto groups = [](const nlohmann::json& line) {
      std::vector<int64_t> g = line["batch_groups"].get<std::vector<int64_t>>();
      std::sort(g.begin(), g.end());
      return g;
    };
    EXPECT_EQ(groups(actual[i]), groups(expected[i])) << "at " << i;
    EXPECT_DOUBLE_EQ(actual[i]["reward_mean"].get<double>(),
                     expected[i]["reward_mean"].get<double>());
    EXPECT_NEAR(actual[i]["grad_norm"].get<double>(), expected[i]["grad_norm"].get<double>(), 1e-5);
  }
  const auto a = load_model_weights(full + "/final");
  const auto b = load_model_weights(resumed + "/final");
  for (const auto& [name, tensor] : a) {
    EXPECT_TRUE(torch::allclose(tensor, b.at(name), 1e-5, 1e-6)) << name;
  }
}

// The error of resuming `dir`, "" if it resumes.
std::string resume_error(const TrainConfig& config, const std::string& dir) {
  RlSetup setup = build_rl_setup(config);
  try {
    run_rl(config, setup, RunOptions{dir, /*resume=*/true});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A copy of the finished run `full` in `name`, to be tampered with and resumed.
std::string copy_of_run(const std::string& full, const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  fs::remove_all(dir);
  fs::copy(full, dir, fs::copy_options::recursive);
  fs::remove_all(dir + "/final");
  fs::remove(dir + "/summary.json");
  return dir;
}

void edit_state(const std::string& checkpoint, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json state = nlohmann::json::parse(read_file(checkpoint + "/state.json"));
  edit(state);
  write_file_atomic(checkpoint + "/state.json", state.dump(1));
}

TEST(Resume, RefusesACheckpointThatContradictsItsRunNamingTheFile) {
  const TrainConfig config =
      testing::tiny_run_config({"checkpoint.every=2", "checkpoint.keep_last=0"});
  const std::string full = ::testing::TempDir() + "/aspen_resume_contradicted_full";
  fs::remove_all(full);
  {
    RlSetup setup = build_rl_setup(config);
    run_rl(config, setup, RunOptions{full});
  }
  ASSERT_TRUE(fs::exists(full + "/checkpoints/iter_000004/manifest.json"));

  // A flipped bit in the policy's weights (it once trained on silently).
  std::string dir = copy_of_run(full, "aspen_resume_flipped");
  const std::string weights = dir + "/checkpoints/iter_000004/policy/model.safetensors";
  std::string bytes = read_file(weights);
  bytes[bytes.size() - 100] ^= 0x40;
  write_file_atomic(weights, bytes);
  std::string what = resume_error(config, dir);
  EXPECT_NE(what.find(weights + ": CRC32C is"), std::string::npos) << what;

  // iteration 10^9 in the newest checkpoint: once skipped every iteration and exported
  // the checkpoint's weights as the final model, exit 0.
  dir = copy_of_run(full, "aspen_resume_iteration_1e9");
  edit_state(dir + "/checkpoints/iter_000004",
             [](nlohmann::json& s) { s["iteration"] = 1000000000; });
  what = resume_error(config, dir);
  EXPECT_NE(what.find(dir + "/checkpoints/iter_000004/state.json: iteration is 1000000000 but its "
                            "directory is the checkpoint of iteration 4"),
            std::string::npos)
      << what;
  EXPECT_FALSE(fs::exists(dir + "/final"));
  // ... and the same state consistent with its directory and checksums.
  const std::string far = dir + "/checkpoints/iter_1000000000";
  fs::rename(dir + "/checkpoints/iter_000004", far);
  edit_state(far, [](nlohmann::json& s) { s["schedule"]["schedule"]["version"] = 1000000000; });
  write_checkpoint_manifest(far);
  what = resume_error(config, dir);
  EXPECT_NE(what.find(far + "/state.json: iteration 1000000000 is past the run's end, "
                            "train.iterations=4"),
            std::string::npos)
      << what;

  // iteration 3 in the checkpoint of iteration 2 (once an error that named no file).
  dir = copy_of_run(full, "aspen_resume_iteration_3");
  fs::remove_all(dir + "/checkpoints/iter_000004");
  edit_state(dir + "/checkpoints/iter_000002", [](nlohmann::json& s) { s["iteration"] = 3; });
  what = resume_error(config, dir);
  EXPECT_NE(what.find(dir + "/checkpoints/iter_000002/state.json: iteration is 3 but its "
                            "directory is the checkpoint of iteration 2"),
            std::string::npos)
      << what;

  // metrics.jsonl without the line of iteration 2: refused, and left as it was.
  dir = copy_of_run(full, "aspen_resume_metrics_gap");
  std::string metrics;
  for (const std::string& line : [&] {
         std::vector<std::string> lines;
         std::ifstream in(dir + "/metrics.jsonl");
         for (std::string l; std::getline(in, l);) lines.push_back(l);
         return lines;
       }()) {
    if (line.find("\"phase\":\"rl\"") != std::string::npos &&
        nlohmann::json::parse(line)["iteration"] == 2) {
      continue;
    }
    metrics += line + "\n";
  }
  write_file_atomic(dir + "/metrics.jsonl", metrics);
  what = resume_error(config, dir);
  EXPECT_NE(what.find(dir + "/metrics.jsonl: line"), std::string::npos) << what;
  EXPECT_NE(what.find("where the line of iteration 2 should be"), std::string::npos) << what;
  EXPECT_EQ(read_file(dir + "/metrics.jsonl"), metrics);

  // A checkpoint of an Aspen before manifests resumes (with a warning), exactly.
  dir = copy_of_run(full, "aspen_resume_no_manifest");
  fs::remove_all(dir + "/checkpoints/iter_000004");
  fs::remove(dir + "/checkpoints/iter_000002/manifest.json");
  EXPECT_EQ(resume_error(config, dir), "");
  const auto a = load_model_weights(full + "/final");
  const auto b = load_model_weights(dir + "/final");
  for (const auto& [name, tensor] : a) EXPECT_TRUE(torch::equal(tensor, b.at(name))) << name;
}

TEST(Resume, WithoutACheckpointIsAClearError) {
  const TrainConfig config = resume_config();
  const std::string dir = ::testing::TempDir() + "/aspen_resume_none";
  fs::remove_all(dir);
  fs::create_directories(dir);
  RlSetup setup = build_rl_setup(config);
  try {
    run_rl(config, setup, RunOptions{dir, /*resume=*/true});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no checkpoint"), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, KeepsOnlyTheNewestAndIgnoresPartialWrites) {
  TrainConfig config = resume_config();
  const std::string dir = ::testing::TempDir() + "/aspen_checkpoint_keep";
  fs::remove_all(dir);
  RlSetup setup = build_rl_setup(config);
  RlWorkers workers(config, setup);
  for (int64_t i = 1; i <= 3; ++i) {
    save_checkpoint(dir, i, setup, workers, testing::example_schedule_state(i, i), 2);
  }
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/iter_000001"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoints/iter_000002"));
  fs::create_directories(dir + "/checkpoints/iter_000009.tmp");  // a save cut short
  EXPECT_EQ(latest_checkpoint(dir), dir + "/checkpoints/iter_000003");
  const LoadedCheckpoint loaded = load_checkpoint(*latest_checkpoint(dir), setup);
  EXPECT_EQ(loaded.iteration, 3);
  EXPECT_EQ(loaded.schedule_state["schedule"]["samples"], 3);
  EXPECT_FALSE(loaded.workers.critic.empty());
  EXPECT_FALSE(loaded.workers.reference.empty());
}

}  // namespace
}  // namespace aspen::pipeline
