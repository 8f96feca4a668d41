// Schedule: when the RL stages (rl_stages.h) run, and on which rows. The run driver
// (rl_run.h) owns everything around it — SFT warm-up, evaluation, metrics file,
// checkpoints, export — so the sync baseline and the async ASP pipeline are compared
// on exactly the same model, data, algorithm and sample count.
//
// One iteration = one training batch of prompts_per_iteration prompt groups (n rows
// each) consumed by the trainer; the returned JSON is that iteration's metrics line.
// state()/restore() hold what a checkpoint needs; they are called between iterations.
// Thread safety: iteration/state/restore are called from the driver's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "aspen/config/train_config.h"
#include "aspen/parallel/process_group.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/rl_stages.h"

namespace aspen {

class TraceWriter;

class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual nlohmann::json iteration(int64_t index) = 0;
  virtual nlohmann::json state() const = 0;
  virtual void restore(const nlohmann::json& state) = 0;
  // Ends background work (async rollout threads); called once after the last iteration.
  virtual void stop() {}
  virtual int64_t samples() const = 0;         // rows generated so far
  virtual int64_t trained_tokens() const = 0;  // response tokens trained on so far
  // A rank that only serves rollout (disaggregated asynchronous placement) runs
  // serve() until the run is over instead of iterations, and writes nothing.
  virtual bool serves_only() const { return false; }
  virtual void serve() {}
  // The ranks that evaluate and leave together at the end: all of them (nullopt here)
  // unless the schedule says otherwise (the asynchronous engine: its trainers, since a
  // rollout rank may have failed and left under pipeline.on_instance_failure).
  virtual bool evaluates_on_trainers() const { return false; }
  virtual std::optional<ProcessGroupHandle> trainer_group() const { return std::nullopt; }
};

struct ScheduleContext {
  const TrainConfig& config;
  RlSetup& setup;
  RlWorkers& workers;
  TraceWriter* trace = nullptr;  // null: no timeline
  // Test hook: called by a role ("collector" per finished group, "trainer" before
  // each update) so tests can inject random delays; empty in real runs.
  std::function<void(const std::string& role)> inject_delay = {};
};

}  // namespace aspen
