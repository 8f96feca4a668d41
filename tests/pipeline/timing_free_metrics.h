// The metrics lines of a run directory without what depends on the wall clock or on
// thread timing: what two runs that train the same must agree on exactly (the resume
// tests compare an uninterrupted run with a resumed one through it).
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace aspen::testing {

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
