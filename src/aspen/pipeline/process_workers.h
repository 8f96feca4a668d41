// ProcessWorkers: the rollout instances and the reward worker that run in this
// process (engine_layout.h says which), their threads, and how their failures reach
// the trainers.
//
// Construction builds each instance's own copy of the policy (its shards, for a
// tensor- or expert-parallel instance) and is collective over `world`: every rank
// creates every multi-rank instance's subgroup. start() runs the workers on threads
// of their own (a rollout-only rank keeps its one instance for serve(), which runs it
// on the calling thread until the run is over). A worker that fails records its
// error for check() and posts it on the dock's status board, so a trainer on another
// rank hears of it; check() rethrows the first error of this process's workers or
// of any rank's. stop() stops and joins them (idempotent).
// Thread safety: construction, start(), serve(), check() and stop() from the
// engine's thread; the workers' errors are collected under a lock.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "aspen/parallel/process_group.h"
#include "aspen/pipeline/engine_layout.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/reward_worker.h"
#include "aspen/pipeline/rollout_worker.h"
#include "aspen/util/mutex.h"

namespace aspen::pipeline {

struct ProcessWorkersOptions {
  WarehouseId weights_from = 0;  // where this process's instances load weights from
  // Colocated tensor-parallel instances: the shards their own rank resharded.
  std::shared_ptr<WeightHistory> own_shards;
  TraceWriter* trace = nullptr;
};

class ProcessWorkers {
 public:
  ProcessWorkers(const TrainConfig& config, RlSetup& setup, const EngineLayout& layout,
                 std::optional<ProcessGroupHandle> world, TransferDock& dock,
                 const ProcessWorkersOptions& options);
  ~ProcessWorkers() { stop(); }

  void start();
  // A rollout-only rank: runs its instance on this thread until the run is over.
  void serve();
  // Rethrows the first error of a worker here or on any rank.
  void check() const;
  void stop();

 private:
  class Errors {
   public:
    void add(std::exception_ptr error);
    std::vector<std::exception_ptr> all() const;

   private:
    mutable Mutex mutex_;
    std::vector<std::exception_ptr> errors_ GUARDED_BY(mutex_);
  };
  void report(const std::string& what);  // on the status board, for the trainers

  const EngineLayout& layout_;
  TransferDock& dock_;
  std::vector<std::unique_ptr<RolloutWorker>> rollout_;
  std::unique_ptr<RewardWorker> reward_;
  Errors errors_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

}  // namespace aspen::pipeline
