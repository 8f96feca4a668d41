// logging.tensorboard: a run's TensorBoard event files, read back by TensorBoard's own
// readers (the `tensorboard` package from PyPI, tools/python/tensorboard_reader.py: the
// classic EventAccumulator and the TensorBoard server's loader), hold every number of
// metrics.jsonl's eval and RL lines, tag = key (nested keys joined with "/"), step = iteration,
// value = the float32 of the line's number, once each. A resumed run adds a file, and TensorBoard
// then shows exactly the resumed metrics.jsonl. An unusable event directory is refused before any
// work.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "aspen/pipeline/rl_run.h"
#include "aspen/util/error.h"
#include "support/oracles.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

// tag -> [(step, value)] in step order.
using ScalarSeries = std::map<std::string, std::vector<std::pair<int64_t, double>>>;

struct TensorBoardView {
  int exit_status = -1;
  std::string errors;
  std::vector<std::string> files;
  ScalarSeries scalars;         // event_accumulator.EventAccumulator
  ScalarSeries server_scalars;  // the TensorBoard server's plugin_event_accumulator
};

ScalarSeries parse_series(const nlohmann::json& json) {
  ScalarSeries series;
  for (const auto& [tag, points] : json.items()) {
    for (const auto& point : points) {
      series[tag].emplace_back(point.at(0).get<int64_t>(), point.at(1).get<double>());
    }
  }
  return series;
}

TensorBoardView read_with_tensorboard(const std::string& dir) {
  const std::string out = dir + "_reader.json";
  const std::string err = dir + "_reader.err";
  const std::string command = "'" + testing::python() + "' '" +
                              testing::oracle_script("tensorboard_reader.py") + "' '" + dir +
                              "' > '" + out + "' 2> '" + err + "'";
  TensorBoardView view;
  const int status = std::system(command.c_str());
  view.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::stringstream errors;
  errors << std::ifstream(err).rdbuf();
  view.errors = command + "\n" + errors.str();
  if (view.exit_status != 0) return view;
  const nlohmann::json json = nlohmann::json::parse(std::ifstream(out));
  view.files = json.at("files").get<std::vector<std::string>>();
  view.scalars = parse_series(json.at("scalars"));
  view.server_scalars = parse_series(json.at("server_scalars"));
  return view;
}

// What TensorBoard should show: metrics.jsonl's eval and RL lines, flattened here on
// their own (not with the writer's numeric_fields, which is what is under test).
void add_flattened(const nlohmann::json& object, const std::string& prefix, int64_t step,
                   ScalarSeries& out) {
  for (const auto& [key, value] : object.items()) {
    if (value.is_object()) add_flattened(value, prefix + key + "/", step, out);
    if (value.is_number()) {
      out[prefix + key].emplace_back(step, static_cast<float>(value.get<double>()));
    }
  }
}

ScalarSeries expected_from_metrics(const std::string& run_dir) {
  ScalarSeries expected;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string text; std::getline(in, text);) {
    const nlohmann::json line = nlohmann::json::parse(text);
    const std::string phase = line.at("phase");
    if (phase == "eval" || phase == "rl") {
      add_flattened(line, "", line.at("iteration").get<int64_t>(), expected);
    }
  }
  return expected;
}

void expect_same_series(const ScalarSeries& actual, const ScalarSeries& expected,
                        const std::string& reader) {
  for (const auto& [tag, points] : expected) {
    const auto found = actual.find(tag);
    if (found == actual.end()) {
      ADD_FAILURE() << reader << " has no " << tag;
      continue;
    }
    EXPECT_EQ(found->second, points) << reader << ": " << tag;
  }
  for (const auto& [tag, points] : actual) {
    EXPECT_TRUE(expected.count(tag)) << reader << " has " << tag << ", metrics.jsonl does not";
  }
}

// Both readers show exactly `expected`.
void expect_tensorboard_shows(const TensorBoardView& view, const ScalarSeries& expected) {
  expect_same_series(view.scalars, expected, "EventAccumulator");
  expect_same_series(view.server_scalars, expected, "the TensorBoard server's loader");
}

std::string fresh_run_dir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  fs::remove_all(dir);
  return dir;
}

TEST(TensorBoardLogging, TensorBoardShowsEveryNumberOfTheEvalAndRlLines) {
  const std::string dir = fresh_run_dir("aspen_tensorboard_run");
  const TrainConfig config =
      testing::tiny_run_config({"logging.tensorboard=true", "logging.eval_every=2"});
  {
    RlSetup setup = build_rl_setup(config);
    const nlohmann::json summary = run_rl(config, setup, RunOptions{dir});
    EXPECT_EQ(summary["tensorboard"], dir + "/tensorboard");
  }
  const nlohmann::json written = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  EXPECT_EQ(written["logging"]["tensorboard"], true);
  EXPECT_FALSE(fs::exists(dir + "/tensorboard/.aspen-write-probe")) << "the start check's probe";

  const TensorBoardView view = read_with_tensorboard(dir + "/tensorboard");
  ASSERT_EQ(view.exit_status, 0) << view.errors;
  ASSERT_EQ(view.files.size(), 1u);
  const ScalarSeries expected = expected_from_metrics(dir);
  // The run logged what this test relies on: the eval before RL, four RL iterations,
  // nested keys, and evaluations at iterations 2 and 4.
  ASSERT_EQ(expected.at("reward_mean").size(), 4u);
  ASSERT_TRUE(expected.count("stage_seconds/update"));
  std::vector<int64_t> eval_steps;
  for (const auto& point : expected.at("eval_accuracy")) eval_steps.push_back(point.first);
  EXPECT_EQ(eval_steps, (std::vector<int64_t>{0, 2, 4}));
  expect_tensorboard_shows(view, expected);
  EXPECT_FALSE(view.scalars.count("phase")) << "strings are not scalars";
}

TEST(TensorBoardLogging, AResumedRunShowsExactlyTheResumedMetrics) {
  const TrainConfig config = testing::tiny_run_config(
      {"logging.tensorboard=true", "checkpoint.every=2", "checkpoint.keep_last=0"});
  const std::string full = fresh_run_dir("aspen_tensorboard_full");
  const std::string resumed = fresh_run_dir("aspen_tensorboard_resumed");
  {
    RlSetup setup = build_rl_setup(config);
    run_rl(config, setup, RunOptions{full});
  }
  // Interrupted after iteration 4's lines were written but before its checkpoint:
  // its event file holds steps 3 and 4, which the resumed run logs again (other
  // wall-clock values: a superseded point left behind would show twice).
  fs::copy(full, resumed, fs::copy_options::recursive);
  fs::remove_all(resumed + "/checkpoints/iter_000004");
  fs::remove_all(resumed + "/final");
  {
    RlSetup setup = build_rl_setup(config);
    const nlohmann::json summary = run_rl(config, setup, RunOptions{resumed, /*resume=*/true});
    ASSERT_EQ(summary["resumed_from_iteration"], 2);
  }
  const TensorBoardView view = read_with_tensorboard(resumed + "/tensorboard");
  ASSERT_EQ(view.exit_status, 0) << view.errors;
  EXPECT_EQ(view.files.size(), 2u) << "the resumed run adds its own file";
  const ScalarSeries expected = expected_from_metrics(resumed);
  ASSERT_EQ(expected.at("seconds").size(), 4u);
  expect_tensorboard_shows(view, expected);

  // A fresh run in the same directory (no checkpoints left) starts TensorBoard empty too.
  fs::remove_all(resumed + "/checkpoints");
  const TrainConfig shorter =
      testing::tiny_run_config({"logging.tensorboard=true", "train.iterations=1", "train.seed=3"});
  {
    RlSetup setup = build_rl_setup(shorter);
    run_rl(shorter, setup, RunOptions{resumed});
  }
  const TensorBoardView fresh = read_with_tensorboard(resumed + "/tensorboard");
  ASSERT_EQ(fresh.exit_status, 0) << fresh.errors;
  EXPECT_EQ(fresh.files.size(), 1u);
  expect_tensorboard_shows(fresh, expected_from_metrics(resumed));
}

TEST(TensorBoardLogging, AnUnusableEventDirectoryIsRefusedBeforeAnyWork) {
  const std::string dir = fresh_run_dir("aspen_tensorboard_blocked");
  fs::create_directories(dir);
  std::ofstream(dir + "/tensorboard") << "a file where the event directory goes";
  const TrainConfig config = testing::tiny_run_config({"logging.tensorboard=true"});
  RlSetup setup = build_rl_setup(config);
  try {
    run_rl(config, setup, RunOptions{dir});
    FAIL() << "expected aspen::Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(dir + "/tensorboard"), std::string::npos) << message;
    EXPECT_NE(message.find("logging.tensorboard"), std::string::npos) << message;
  }
  EXPECT_FALSE(fs::exists(dir + "/metrics.jsonl")) << "it failed before writing anything";
}

}  // namespace
}  // namespace aspen::pipeline
