// What the resume tests share: resuming a finished run from its iteration-2 checkpoint,
// and its metrics lines without what depends on the wall clock or on thread timing -
// what an uninterrupted and a resumed run must agree on exactly.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/pipeline/rl_run.h"

namespace aspen::testing {

// Copies the finished 4-iteration run `full` as it was on disk right after its
// iteration-2 checkpoint into `resumed`, and resumes it there.
inline void resume_after_iteration_two(const pipeline::TrainConfig& config, const std::string& full,
                                       const std::string& resumed) {
  namespace fs = std::filesystem;
  fs::copy(full, resumed, fs::copy_options::recursive);
  fs::remove_all(resumed + "/checkpoints/iter_000004");
  fs::remove_all(resumed + "/final");
  fs::remove(resumed + "/summary.json");
  pipeline::RlSetup setup = pipeline::build_rl_setup(config);
  const nlohmann::json summary =
      pipeline::run_rl(config, setup, pipeline::RunOptions{resumed, /*resume=*/true});
  EXPECT_EQ(summary["resumed_from_iteration"], 2);
}

// The metrics lines without the wall-clock fields.
// (Every line, not only RL ones: the SFT and eval lines before RL must survive too.)
inline std::vector<nlohmann::json> metrics_without_timing(const std::string& dir) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json json = nlohmann::json::parse(line);
    // Also what depends on thread timing: how old the instances' states were, how many
    // groups an idle instance took over (counted since the process started), the dock
    // calls (a resumed run admits its open groups at restore, in another line), the
    // instances' steps and tokens within each iteration's window (rollout_work), and the
    // rollout's log-probs to the last bits - a group generated in another instance's
    // batch rounds differently (measured: diff_mean 1.51e-7 vs 1.59e-7 on a loaded
    // machine; the trained weights stay bit-identical, checked below).
    for (const char* timing : {"seconds", "stage_seconds", "tokens_per_second", "effective_tps",
                               "instance_status_age_max_s", "stolen_groups", "dock_row_calls",
                               "rollout_work", "rollout_logprob_diff_mean",
                               "rollout_logprob_diff_max"}) {
      json.erase(timing);
    }
    if (json.contains("bubbles")) {
      for (const char* timing : {"trainer_idle", "rollout_idle", "sorting", "skewness"}) {
        json["bubbles"].erase(timing);
      }
    }
    lines.push_back(json);
  }
  return lines;
}

}  // namespace aspen::testing
