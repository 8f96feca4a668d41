// Dispatcher: picks the rollout instance that receives the next prompt group
// (a group stays on one instance, so its prompt prefix is computed once).
//
// Policies (config key pipeline.dispatch):
//   round_robin     0, 1, 2, ... regardless of load.
//   least_requests  fewest samples (running + waiting); ties -> lowest index.
//   queue_aware     least expected completion time (formula below); ties -> lowest index.
//
// queue_aware, per instance i, in tokens and seconds:
//   est        = response-length estimate for this group, min(mean_response, group.max_tokens);
//                mean_response starts at group.max_tokens / 2 and follows on_completed
//                reports (running mean for the first 1/kResponseAlpha samples, then an EMA).
//   S_i        = running + waiting, U_i = outstanding_tokens (from QueueState).
//   reported_i = min(U_i, S_i * est)   U_i is an upper bound (every sample runs to
//                max_tokens); S_i * est is the mean-length guess. Taking the smaller keeps a
//                nearly finished instance cheap however many samples it holds.
//   unseen_i   = max(0, own_i - S_i)   samples this dispatcher sent (on_dispatched minus
//                on_completed) that the state does not show yet: the caller may dispatch
//                several groups from one queue-state snapshot. Each costs est plus the
//                instance's mean outstanding prompt tokens per dispatched sample.
//   time_i     = (reported_i + unseen_i * (est + prompt_per_sample_i)
//                 + group.prompt_tokens + group.n * est) / throughput_i
//   throughput_i: EMA (kThroughputAlpha) of on_throughput reports; an instance without
//                reports uses the mean of those with reports (all equal when none has).
// Prefill and decode tokens are weighted alike: a simplification, decode dominates RL
// rollout time. least_requests counts max(S_i, own_i) samples for the same reason as unseen_i.
// Completions the instance has finished but the caller has not yet reported make own_i
// briefly exceed S_i; report completions promptly to keep that small.
//
// Thread safety: every method may be called from any thread (one internal mutex), so a
// dispatching thread and a completion-draining thread can share one Dispatcher.
// Errors: invalid arguments throw aspen::Error (input "pipeline.dispatch" for the policy
// name, "Dispatcher::<method>" otherwise).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aspen/config/train_config.h"
#include "aspen/pipeline/imports.h"
#include "aspen/rollout/engine.h"
#include "aspen/util/mutex.h"

namespace aspen::pipeline {

// DispatchPolicyKind (config/train_config.h, the key pipeline.dispatch) names the policy:
// the config owns it so that reading a config needs no dispatcher.

// One prompt group as the dispatcher sees it.
struct GroupShape {
  int64_t n = 1;              // samples in the group
  int64_t prompt_tokens = 0;  // prompt length (prefilled once per group)
  int64_t max_tokens = 1;     // response budget per sample
};

class Dispatcher {
 public:
  static constexpr double kResponseAlpha = 0.05;   // EMA weight of one completion
  static constexpr double kThroughputAlpha = 0.3;  // EMA weight of one throughput report

  Dispatcher(DispatchPolicyKind kind, int num_instances);

  // Instance for `group`, given the latest queue state of every instance
  // (states.size() == num_instances()). Does not record the dispatch: call
  // on_dispatched with the instance actually used.
  int choose(const std::vector<QueueState>& states, const GroupShape& group) EXCLUDES(mutex_);

  // `group` was submitted to `instance`.
  void on_dispatched(int instance, const GroupShape& group) EXCLUDES(mutex_);
  // One sample of a group on `instance` finished with `response_tokens` generated.
  // `prompt_tokens` is validated only: the dispatcher does not track which group a
  // sample belongs to, so it releases the instance's outstanding prompt tokens in
  // proportion (one outstanding sample's share per completion).
  void on_completed(int instance, int64_t prompt_tokens, int64_t response_tokens) EXCLUDES(mutex_);
  // Observed generation throughput of `instance` (tokens per second, > 0).
  void on_throughput(int instance, double tokens_per_s) EXCLUDES(mutex_);

  // Introspection (for metrics and tests).
  DispatchPolicyKind kind() const { return kind_; }
  int num_instances() const { return num_instances_; }
  // Response-length estimate used for a group with this max_tokens.
  double response_estimate(int64_t max_tokens) const EXCLUDES(mutex_);
  // Throughput (tokens/s) used for `instance`; 1.0 for all when nothing was reported.
  double throughput(int instance) const EXCLUDES(mutex_);
  // queue_aware's expected completion time (seconds, in units of 1/throughput) of
  // `group` on each instance.
  std::vector<double> expected_seconds(const std::vector<QueueState>& states,
                                       const GroupShape& group) const EXCLUDES(mutex_);
  // Samples dispatched to `instance` and not yet reported completed.
  int64_t own_outstanding(int instance) const EXCLUDES(mutex_);

 private:
  struct InstanceAccount {
    int64_t samples = 0;       // dispatched, not yet completed
    double prompt_tokens = 0;  // prompt tokens of those samples' groups (released pro rata)
    double throughput = 0;     // EMA, tokens/s
    bool has_throughput = false;
  };

  void check_instance(int instance, const char* method) const;
  void check_states(const std::vector<QueueState>& states, const GroupShape& group,
                    const char* method) const;
  double response_estimate_locked(int64_t max_tokens) const REQUIRES(mutex_);
  double throughput_locked(int instance) const REQUIRES(mutex_);
  std::vector<double> expected_seconds_locked(const std::vector<QueueState>& states,
                                              const GroupShape& group) const REQUIRES(mutex_);

  const DispatchPolicyKind kind_;
  const int num_instances_;  // instances_.size(), fixed: readable without the lock
  mutable Mutex mutex_;
  std::vector<InstanceAccount> instances_ GUARDED_BY(mutex_);
  int next_round_robin_ GUARDED_BY(mutex_) = 0;
  double mean_response_ GUARDED_BY(mutex_) = 0;
  int64_t completions_ GUARDED_BY(mutex_) = 0;
};

}  // namespace aspen::pipeline
