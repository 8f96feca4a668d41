#include "aspen/pipeline/reward_worker.h"

#include <chrono>

#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_rows.h"
#include "aspen/pipeline/rl_stages.h"
#include "aspen/report/trace_writer.h"

namespace aspen::pipeline {

RewardWorker::RewardWorker(const TrainConfig& config, const RlSetup& setup, TransferDock& dock,
                           TraceWriter* trace, const std::string& track_name)
    : config_(config), setup_(setup), dock_(dock), trace_(trace) {
  if (trace_ != nullptr) track_ = trace_->track(track_name);
}

std::exception_ptr RewardWorker::error() const {
  MutexLock lock(mutex_);
  return error_;
}

void RewardWorker::run() {
  // One group per claim: scoring it is short next to its lease, so a lease never runs
  // out under a live worker and a dead one's group comes back soon.
  ClaimOptions options = claim_rows(config_.rollout.n, /*whole_groups=*/true);
  options.timeout_s = 0.05;  // wake often enough to see stop()
  // A reward process that dies loses nothing either: its group comes back.
  options.lease_s = std::max(10.0, config_.pipeline.instance_timeout_s);
  try {
    while (!stopping_) {
      const Claim claim = dock_.claim(rl_consumers::kReward, options);
      if (claim.empty()) continue;
      const auto start = std::chrono::steady_clock::now();
      reward_stage(config_, setup_, dock_, claim);
      if (trace_ != nullptr) {
        trace_->span(track_, "reward", start, std::chrono::steady_clock::now(),
                     {{"rows", static_cast<int64_t>(claim.rows.size())}});
      }
    }
  } catch (...) {
    MutexLock lock(mutex_);
    error_ = std::current_exception();
  }
}

}  // namespace aspen::pipeline
