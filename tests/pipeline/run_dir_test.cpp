// The run directory and every output path are checked before any work: a fresh run
// never reuses an earlier run's checkpoints (pruning would delete the new run's and
// --resume would finish the old run), and an unwritable trace or output directory is
// an error at the start, not after training.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <string>

#include "aspen/pipeline/checkpoint.h"
#include "aspen/pipeline/rl_run.h"
#include "aspen/util/error.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

// Runs and returns the aspen::Error's text ("" when it ran).
std::string run_error(const TrainConfig& config, const RunOptions& options) {
  RlSetup setup = build_rl_setup(config);
  try {
    run_rl(config, setup, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RunDirectory, AFreshRunRefusesADirectoryHoldingAnEarlierRunsCheckpoints) {
  const std::string dir = ::testing::TempDir() + "/aspen_run_dir_reused";
  fs::remove_all(dir);
  const TrainConfig first = testing::tiny_run_config(
      {"train.iterations=2", "checkpoint.every=1", "checkpoint.keep_last=0"});
  ASSERT_EQ(run_error(first, RunOptions{dir}), "");
  const auto checkpoint = latest_checkpoint(dir);
  ASSERT_TRUE(checkpoint.has_value());

  const TrainConfig second = testing::tiny_run_config({"train.iterations=1", "train.seed=7"});
  const std::string error = run_error(second, RunOptions{dir});
  EXPECT_NE(error.find("holds the checkpoints of an earlier run"), std::string::npos) << error;
  EXPECT_NE(error.find("--resume " + dir), std::string::npos) << error;
  // Nothing of the earlier run was touched.
  EXPECT_EQ(latest_checkpoint(dir), checkpoint);
  EXPECT_TRUE(fs::exists(dir + "/final/config.json"));
  EXPECT_EQ(read_rl_metrics(dir).size(), 2u);

  // Resuming it is still allowed (and there is nothing left to run).
  RlSetup setup = build_rl_setup(first);
  const nlohmann::json summary = run_rl(first, setup, RunOptions{dir, /*resume=*/true});
  EXPECT_EQ(summary["resumed_from_iteration"], 2);
}

TEST(RunDirectory, UnwritableOutputPathsAreRefusedBeforeAnyTraining) {
  // As root every permission check passes, so the unwritable places are /proc's.
  const std::string dir = ::testing::TempDir() + "/aspen_run_dir_trace";
  fs::remove_all(dir);
  const std::string trace_error =
      run_error(testing::tiny_run_config({"logging.trace=/proc/aspen-no-such-dir/trace.json"}),
                RunOptions{dir});
  EXPECT_NE(trace_error.find("/proc/aspen-no-such-dir/trace.json"), std::string::npos)
      << trace_error;
  EXPECT_NE(trace_error.find("logging.trace"), std::string::npos) << trace_error;
  EXPECT_FALSE(fs::exists(dir + "/metrics.jsonl")) << "it failed before writing anything";

  const std::string out_error =
      run_error(testing::tiny_run_config({}), RunOptions{"/proc/aspen-run-dir"});
  EXPECT_NE(out_error.find("/proc/aspen-run-dir"), std::string::npos) << out_error;

  const std::string as_directory = run_error(
      testing::tiny_run_config({"logging.trace=" + ::testing::TempDir()}), RunOptions{dir});
  EXPECT_NE(as_directory.find("is a directory"), std::string::npos) << as_directory;
}

TEST(RunDirectory, ATraceThatIsAFifoOrDeviceIsRefusedBeforeAnyTrainingWithoutBlocking) {
  // The old check opened the trace for appending: on a FIFO that blocks for ever, and a
  // device (/dev/full) was then replaced by a regular file at the end of the run.
  const std::string dir = ::testing::TempDir() + "/aspen_run_dir_fifo";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string fifo = dir + "/trace.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string error =
      run_error(testing::tiny_run_config({"logging.trace=" + fifo}), RunOptions{dir + "/run"});
  EXPECT_NE(error.find("logging.trace " + fifo + ": is a FIFO"), std::string::npos) << error;
  EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
  EXPECT_FALSE(fs::exists(dir + "/run")) << "refused before the run directory was made";

  const std::string device = dir + "/full";
  if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0) {  // root only
    const std::string device_error = run_error(
        testing::tiny_run_config({"logging.trace=" + device}), RunOptions{dir + "/run"});
    EXPECT_NE(device_error.find("is a character device"), std::string::npos) << device_error;
    EXPECT_TRUE(fs::is_character_file(fs::symlink_status(device)));
  }
}

}  // namespace
}  // namespace aspen::pipeline
