// What --resume checks of a checkpoint against its run (pipeline/resume_check.h): a
// state.json past the run's end, of another dataset, or with counters that the
// metrics.jsonl beside it does not add up to, and a metrics.jsonl missing the lines of
// iterations the checkpoint completed, are refused naming the file; a run as Aspen
// writes it (a torn line after the checkpoint's included) is accepted.
#include "aspen/pipeline/resume_check.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "aspen/util/error.h"
#include "aspen/util/file.h"
#include "checkpoint_state_fixture.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

// A run directory after iteration 2 as Aspen writes it: the state of the fixture
// (16 samples, 300 tokens, 1 group consumed, accuracy 0.5 before RL and 0.75 after)
// and metrics lines that add up to it, then a line of iteration 3 torn by a kill.
struct RunFiles {
  std::string state_path;
  std::string metrics_path;
  std::vector<std::string> lines;
};

RunFiles run_files(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/aspen_resume_check_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir + "/checkpoints/iter_000002");
  RunFiles files{dir + "/checkpoints/iter_000002/state.json", dir + "/metrics.jsonl", {}};
  files.lines = {R"({"phase":"sft","step":20,"nll":1.5})",
                 R"({"phase":"eval","iteration":0,"eval_accuracy":0.5})",
                 R"({"phase":"rl","iteration":1,"rows":8,"trained_tokens":100,"trained_groups":1})",
                 R"({"phase":"rl","iteration":2,"rows":8,"trained_tokens":200,"trained_groups":0,)"
                 R"("eval_accuracy":0.75})",
                 R"({"phase":"rl","iteration":3,"rows":8,"tra)"};
  return files;
}

std::string refusal(const RunFiles& files, const nlohmann::json& schedule, int64_t iteration = 2,
                    int64_t examples = 4, const TrainConfig& config = testing::tiny_run_config()) {
  std::string text;
  for (const std::string& line : files.lines) text += line + "\n";
  write_file_atomic(files.metrics_path, text);
  try {
    check_checkpoint_against_run(iteration, schedule, files.state_path, config, examples,
                                 files.metrics_path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ResumeCheck, AcceptsARunAsAspenWritesIt) {
  const RunFiles files = run_files("intact");
  EXPECT_EQ(refusal(files, testing::example_schedule_state()), "");
}

TEST(ResumeCheck, RefusesAnIterationPastTheRunsEnd) {
  const RunFiles files = run_files("past_end");
  const std::string what = refusal(files, testing::example_schedule_state(16, 1000000000),
                                   /*iteration=*/1000000000);
  EXPECT_NE(what.find(files.state_path + ": iteration 1000000000 is past the run's end, "
                                         "train.iterations=4"),
            std::string::npos)
      << what;
}

TEST(ResumeCheck, RefusesAPromptStateOfAnotherDataset) {
  const RunFiles files = run_files("dataset");
  const std::string what = refusal(files, testing::example_schedule_state(), 2, /*examples=*/200);
  EXPECT_NE(what.find(files.state_path + ": schedule.schedule.prompts.num_examples is 4 but the "
                                         "run's training data has 200 examples"),
            std::string::npos)
      << what;
}

TEST(ResumeCheck, RefusesMetricsMissingALineTheCheckpointCompleted) {
  RunFiles files = run_files("missing_line");
  files.lines.erase(files.lines.begin() + 3);  // iteration 2
  files.lines.pop_back();                      // (a torn line before it is refused below)
  std::string what = refusal(files, testing::example_schedule_state());
  EXPECT_NE(what.find(files.metrics_path + ": holds the lines of iterations 1..1 only"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("iter_000002 was written after iteration 2"), std::string::npos) << what;

  files = run_files("missing_first");
  files.lines.erase(files.lines.begin() + 2);  // iteration 1
  what = refusal(files, testing::example_schedule_state());
  EXPECT_NE(what.find(files.metrics_path + ": line 3 is the line of iteration 2 where the line "
                                           "of iteration 1 should be"),
            std::string::npos)
      << what;

  files = run_files("repeated");
  files.lines.insert(files.lines.begin() + 3, files.lines[2]);
  EXPECT_NE(refusal(files, testing::example_schedule_state())
                .find("line 4 is the line of "
                      "iteration 1 where"),
            std::string::npos);

  files = run_files("torn_before");
  files.lines[3] = R"({"phase":"rl","itera)";
  EXPECT_NE(refusal(files, testing::example_schedule_state()).find("line 4 is not a JSON object"),
            std::string::npos);

  files = run_files("no_metrics");
  fs::remove(files.metrics_path);
  try {
    check_checkpoint_against_run(2, testing::example_schedule_state(), files.state_path,
                                 testing::tiny_run_config(), 4, files.metrics_path);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(files.metrics_path + ": is missing"), std::string::npos)
        << e.what();
  }
}

TEST(ResumeCheck, RefusesCountersTheMetricsDoNotAddUpTo) {
  const RunFiles files = run_files("counters");
  std::string what = refusal(files, testing::example_schedule_state(/*samples=*/17));
  EXPECT_NE(what.find(files.state_path +
                      ": schedule.schedule.samples is 17 but the lines of "
                      "iterations 1..2 in " +
                      files.metrics_path + " add up to 16 (their rows)"),
            std::string::npos)
      << what;
  nlohmann::json state = testing::example_schedule_state();
  state["schedule"]["trained_tokens"] = 301;
  EXPECT_NE(refusal(files, state).find("trained_tokens is 301 but"), std::string::npos);
  state = testing::example_schedule_state();
  state["schedule"]["consumed_groups"] = 2;
  EXPECT_NE(refusal(files, state).find("consumed_groups is 2 but"), std::string::npos);
  state = testing::example_schedule_state();
  state["evals"]["after"] = 0.25;
  EXPECT_NE(refusal(files, state).find("evals.after is 0.25 but"), std::string::npos);
  state = testing::example_schedule_state();
  state["evals"]["before"] = 0.25;
  EXPECT_NE(refusal(files, state).find("evals.before is 0.25 but"), std::string::npos);
}

TEST(ResumeCheck, SkipsASumWhereAnOlderLineLacksTheField) {
  RunFiles files = run_files("older_lines");
  files.lines[2] = R"({"phase":"rl","iteration":1,"trained_tokens":100,"trained_groups":1})";
  // samples (rows) is not checked; the others still are.
  EXPECT_EQ(refusal(files, testing::example_schedule_state(/*samples=*/99)), "");
  nlohmann::json state = testing::example_schedule_state();
  state["schedule"]["trained_tokens"] = 301;
  EXPECT_NE(refusal(files, state).find("trained_tokens is 301 but"), std::string::npos);
}

}  // namespace
}  // namespace aspen::pipeline
