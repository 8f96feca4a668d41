// What a rollout instance tells the dispatcher, through the dock controller's status
// board (ControllerApi::post_status) under the key "instance/<index>": its queue
// state, its cumulative work, the weights it runs and whether it has left the run.
// The dispatcher may run on another rank; it sees a state as old as the board entry's
// age, which RolloutWorker bounds (rollout_worker.h: at most status_period_s while
// the instance works, plus one dock round trip).
// Thread safety: pure functions. Errors: aspen::Error for a malformed status.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "aspen/pipeline/imports.h"
#include "aspen/rollout/engine.h"

namespace aspen::pipeline {

struct InstanceStatus {
  int instance = 0;
  int rank = 0;  // the process that runs it
  QueueState queue;
  int64_t claimed_samples = 0;  // claimed from the dock, cumulative
  int64_t stolen_groups = 0;    // of those, groups dispatched to another instance
  int64_t cut_samples = 0;      // partial rollouts: samples cut with output, cumulative
  int64_t cut_tokens = 0;       // ... their output tokens (carried, not recomputed)
  int64_t resumed_samples = 0;  // samples continued from a cut output, cumulative
  // Finished samples and their tokens, cumulative: the dispatcher's completion reports.
  int64_t completed_samples = 0;
  int64_t completed_prompt_tokens = 0;
  int64_t completed_response_tokens = 0;
  double busy_seconds = 0.0;     // EngineStats::busy_seconds
  // Trajectories: seconds its engine sat idle while trajectories waited on their
  // environments (the tool_wait bubble), cumulative.
  double tool_wait_seconds = 0.0;
  int64_t environment_errors = 0;  // trajectories its environments failed, cumulative
  // Its trajectory source's counters (TrajectorySource::counters: an agent loop's
  // agent_* metrics), cumulative; absent from older encodings.
  std::map<std::string, int64_t> trajectory_counters;
  int64_t scheduled_tokens = 0;  // EngineStats::scheduled_tokens
  int64_t steps = 0;             // EngineStats::steps
  int64_t version = 0;           // policy version of the weights it runs
  bool exited = false;           // left the run (the run ended, or it failed)
};

std::string instance_status_key(int instance);
inline constexpr const char* kInstanceStatusPrefix = "instance/";
std::string encode_instance_status(const InstanceStatus& status);
InstanceStatus decode_instance_status(const std::string& encoded);

}  // namespace aspen::pipeline
