#include "aspen/pipeline/dispatch_policy.h"

#include <algorithm>
#include <cmath>

#include "aspen/pipeline/imports.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {

Dispatcher::Dispatcher(DispatchPolicyKind kind, int num_instances)
    : kind_(kind), num_instances_(num_instances) {
  check_input(num_instances >= 1,
              "number of rollout instances must be >= 1, got " + std::to_string(num_instances),
              "Dispatcher");
  instances_.resize(static_cast<size_t>(num_instances));
}

void Dispatcher::check_instance(int instance, const char* method) const {
  check_input(instance >= 0 && instance < num_instances(),
              "instance " + std::to_string(instance) + " out of range [0, " +
                  std::to_string(num_instances()) + ")",
              std::string("Dispatcher::") + method);
}

void Dispatcher::check_states(const std::vector<QueueState>& states, const GroupShape& group,
                              const char* method) const {
  const std::string where = std::string("Dispatcher::") + method;
  check_input(static_cast<int>(states.size()) == num_instances(),
              "got " + std::to_string(states.size()) + " queue states for " +
                  std::to_string(num_instances()) + " instances",
              where);
  check_input(
      group.n >= 1 && group.prompt_tokens >= 0 && group.max_tokens >= 1,
      "group needs n >= 1, prompt_tokens >= 0, max_tokens >= 1 (got n=" + std::to_string(group.n) +
          ", prompt_tokens=" + std::to_string(group.prompt_tokens) +
          ", max_tokens=" + std::to_string(group.max_tokens) + ")",
      where);
}

int Dispatcher::choose(const std::vector<QueueState>& states, const GroupShape& group) {
  MutexLock lock(mutex_);
  check_states(states, group, "choose");
  const int count = num_instances();
  switch (kind_) {
    case DispatchPolicyKind::kRoundRobin: {
      const int chosen = next_round_robin_;
      next_round_robin_ = (next_round_robin_ + 1) % count;
      return chosen;
    }
    case DispatchPolicyKind::kLeastRequests: {
      int best = 0;
      int64_t best_samples = 0;
      for (int i = 0; i < count; ++i) {
        const QueueState& s = states[static_cast<size_t>(i)];
        // max(): groups dispatched since the snapshot count even if the state lacks them.
        const int64_t samples = std::max(s.running + s.waiting, instances_[i].samples);
        if (i == 0 || samples < best_samples) {
          best = i;
          best_samples = samples;
        }
      }
      return best;
    }
    case DispatchPolicyKind::kQueueAware: {
      const std::vector<double> seconds = expected_seconds_locked(states, group);
      // Strict < keeps the lowest index on ties.
      return static_cast<int>(std::min_element(seconds.begin(), seconds.end()) - seconds.begin());
    }
  }
  return 0;
}

void Dispatcher::on_dispatched(int instance, const GroupShape& group) {
  MutexLock lock(mutex_);
  check_instance(instance, "on_dispatched");
  check_input(group.n >= 1 && group.prompt_tokens >= 0, "group needs n >= 1 and prompt_tokens >= 0",
              "Dispatcher::on_dispatched");
  InstanceAccount& account = instances_[static_cast<size_t>(instance)];
  account.samples += group.n;
  account.prompt_tokens += static_cast<double>(group.prompt_tokens);
}

void Dispatcher::on_completed(int instance, int64_t prompt_tokens, int64_t response_tokens) {
  MutexLock lock(mutex_);
  check_instance(instance, "on_completed");
  check_input(prompt_tokens >= 0 && response_tokens >= 0,
              "token counts must be >= 0 (got prompt " + std::to_string(prompt_tokens) +
                  ", response " + std::to_string(response_tokens) + ")",
              "Dispatcher::on_completed");
  InstanceAccount& account = instances_[static_cast<size_t>(instance)];
  if (account.samples > 0) {
    // Release one outstanding sample's share of the prompt tokens (see header).
    account.prompt_tokens -= account.prompt_tokens / static_cast<double>(account.samples);
    account.samples -= 1;
    if (account.samples == 0) account.prompt_tokens = 0;  // no rounding residue
  }
  // Running mean until 1/alpha samples are in (so the max_tokens/2 prior is not
  // remembered), then an EMA that follows the policy's changing lengths.
  completions_ += 1;
  const double weight = std::max(kResponseAlpha, 1.0 / static_cast<double>(completions_));
  mean_response_ += weight * (static_cast<double>(response_tokens) - mean_response_);
}

void Dispatcher::on_throughput(int instance, double tokens_per_s) {
  MutexLock lock(mutex_);
  check_instance(instance, "on_throughput");
  check_input(std::isfinite(tokens_per_s) && tokens_per_s > 0,
              "throughput must be a finite number > 0, got " + std::to_string(tokens_per_s),
              "Dispatcher::on_throughput");
  InstanceAccount& account = instances_[static_cast<size_t>(instance)];
  if (!account.has_throughput) {
    account.throughput = tokens_per_s;
    account.has_throughput = true;
  } else {
    account.throughput += kThroughputAlpha * (tokens_per_s - account.throughput);
  }
}

double Dispatcher::response_estimate(int64_t max_tokens) const {
  MutexLock lock(mutex_);
  return response_estimate_locked(max_tokens);
}

double Dispatcher::response_estimate_locked(int64_t max_tokens) const {
  const double cap = static_cast<double>(std::max<int64_t>(max_tokens, 0));
  if (completions_ == 0) return cap / 2;
  return std::min(mean_response_, cap);
}

double Dispatcher::throughput(int instance) const {
  MutexLock lock(mutex_);
  check_instance(instance, "throughput");
  return throughput_locked(instance);
}

double Dispatcher::throughput_locked(int instance) const {
  const InstanceAccount& account = instances_[static_cast<size_t>(instance)];
  if (account.has_throughput) return account.throughput;
  // Unreported instances are assumed average, not 1 token/s beside measured ones.
  double sum = 0;
  int reported = 0;
  for (const InstanceAccount& other : instances_) {
    if (!other.has_throughput) continue;
    sum += other.throughput;
    reported += 1;
  }
  return reported > 0 ? sum / reported : 1.0;
}

std::vector<double> Dispatcher::expected_seconds(const std::vector<QueueState>& states,
                                                 const GroupShape& group) const {
  MutexLock lock(mutex_);
  check_states(states, group, "expected_seconds");
  return expected_seconds_locked(states, group);
}

std::vector<double> Dispatcher::expected_seconds_locked(const std::vector<QueueState>& states,
                                                        const GroupShape& group) const {
  const double est = response_estimate_locked(group.max_tokens);
  const double group_cost =
      static_cast<double>(group.prompt_tokens) + static_cast<double>(group.n) * est;
  std::vector<double> seconds(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    const QueueState& s = states[i];
    const InstanceAccount& account = instances_[i];
    const int64_t reported_samples = std::max<int64_t>(0, s.running + s.waiting);
    const double reported =
        std::min(static_cast<double>(std::max<int64_t>(0, s.outstanding_tokens)),
                 static_cast<double>(reported_samples) * est);
    double unseen_work = 0;
    const int64_t unseen = std::max<int64_t>(0, account.samples - reported_samples);
    if (unseen > 0) {
      const double prompt_per_sample = account.prompt_tokens / static_cast<double>(account.samples);
      unseen_work = static_cast<double>(unseen) * (est + prompt_per_sample);
    }
    seconds[i] = (reported + unseen_work + group_cost) / throughput_locked(static_cast<int>(i));
  }
  return seconds;
}

int64_t Dispatcher::own_outstanding(int instance) const {
  MutexLock lock(mutex_);
  check_instance(instance, "own_outstanding");
  return instances_[static_cast<size_t>(instance)].samples;
}

}  // namespace aspen::pipeline
