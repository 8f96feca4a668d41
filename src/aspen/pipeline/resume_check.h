// What `aspen train --resume` checks before it continues from a checkpoint: that the
// checkpoint's state.json agrees with the run it resumes, so that an edited or foreign
// state is refused naming the file instead of exiting 0 with a different model (a state
// at iteration 10^9 would skip every iteration and export the checkpoint's weights as
// the final model).
//
// Against the run's configuration:
//   iteration <= train.iterations (a checkpoint cannot lie past the run's end);
//   schedule.schedule.prompts.num_examples == the training examples loaded.
// Against RUN_DIR/metrics.jsonl, whose lines are written before each checkpoint:
//   exactly one "rl" line for each of the iterations 1..N the checkpoint completed, in
//   order, each one JSON (a torn line may follow them: cut at resume);
//   samples, trained_tokens and consumed_groups == the sums of those lines' rows,
//   trained_tokens and trained_groups (where every line has the field: older lines may
//   lack one);
//   evals.before == the "eval" line of iteration 0's eval_accuracy, evals.after == the
//   last eval_accuracy of lines 1..N (evals.before if none), where those lines exist.
// Errors: aspen::Error naming state.json (a field that contradicts the run) or
// metrics.jsonl (a line missing or repeated). Thread safety: reads files only.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "aspen/config/train_config.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

// `iteration` and `schedule_state` ({"evals", "schedule"}) as read from `state_path`
// (read_checkpoint_state: already checked in form).
void check_checkpoint_against_run(int64_t iteration, const nlohmann::json& schedule_state,
                                  const std::string& state_path, const TrainConfig& config,
                                  int64_t train_examples, const std::string& metrics_path);

}  // namespace aspen::pipeline
