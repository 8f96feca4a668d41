// RewardWorker: the reward stage of the pipeline as a loop of its own: it claims
// whole generated groups of consumer "reward" from the dock (whichever warehouse
// holds them), scores them (reward_stage: verifier, DAPO overlong shaping; the
// example comes from the rows' `example` column) and acks, which makes them ready
// for the trainer's batch claim (which drops DAPO's uninformative groups:
// iteration_engine.h).
// Runs beside the rollout instances of a process, on its own thread.
// Thread safety: run() on one thread; stop() from any thread. The first error ends
// run() and is kept for error() (the trainer rethrows it).
#pragma once

#include <atomic>
#include <exception>

#include "aspen/config/train_config.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/util/mutex.h"

// Forward declared in its own module's namespace (report).
namespace aspen::report {
class TraceWriter;
}  // namespace aspen::report

namespace aspen::pipeline {

class RewardWorker {
 public:
  RewardWorker(const TrainConfig& config, const RlSetup& setup, TransferDock& dock,
               TraceWriter* trace = nullptr, const std::string& track_name = "reward");
  void run();
  void stop() { stopping_ = true; }
  // The error that ended run(), or null.
  std::exception_ptr error() const;

 private:
  const TrainConfig& config_;
  const RlSetup& setup_;
  TransferDock& dock_;
  TraceWriter* trace_;
  int track_ = 0;
  std::atomic<bool> stopping_{false};
  mutable Mutex mutex_;
  std::exception_ptr error_ GUARDED_BY(mutex_);
};

}  // namespace aspen::pipeline
