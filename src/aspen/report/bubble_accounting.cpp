#include "aspen/report/bubble_accounting.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "aspen/report/imports.h"
#include "aspen/util/error.h"

namespace aspen::report {

namespace {

const char* kInput = "BubbleAccounting";

double ratio(double numerator, double denominator) {
  return denominator > 0 ? numerator / denominator : 0.0;
}

void check_seconds(double seconds, const char* what) {
  check_input(std::isfinite(seconds) && seconds >= 0,
              std::string(what) + " must be a finite number >= 0, got " + std::to_string(seconds),
              kInput);
}

}  // namespace

PaddedSlots padded_slots(const std::vector<int64_t>& lengths) {
  PaddedSlots result;
  if (lengths.empty()) return result;
  int64_t longest = 0;
  int64_t sum = 0;
  for (int64_t length : lengths) {
    check_input(length >= 0, "row length must be >= 0, got " + std::to_string(length), kInput);
    longest = std::max(longest, length);
    sum += length;
  }
  result.slots = longest * static_cast<int64_t>(lengths.size());
  result.pad = result.slots - sum;
  return result;
}

double padding_fraction(const std::vector<std::vector<int64_t>>& batches) {
  int64_t slots = 0;
  int64_t pad = 0;
  for (const auto& batch : batches) {
    const PaddedSlots one = padded_slots(batch);
    slots += one.slots;
    pad += one.pad;
  }
  return ratio(static_cast<double>(pad), static_cast<double>(slots));
}

BubbleAccounting::BubbleAccounting(int rollout_workers, int trainer_workers)
    : rollout_workers_(rollout_workers), trainer_workers_(trainer_workers) {
  check_input(rollout_workers >= 1 && trainer_workers >= 1,
              "worker counts must be >= 1 (rollout " + std::to_string(rollout_workers) +
                  ", trainer " + std::to_string(trainer_workers) + ")",
              kInput);
}

void BubbleAccounting::add_padded_batch(BubbleRole role, const std::vector<int64_t>& lengths) {
  const PaddedSlots one = padded_slots(lengths);  // validates before locking
  MutexLock lock(mutex_);
  Padding& padding = role == BubbleRole::kRollout ? rollout_padding_ : train_padding_;
  padding.slots += one.slots;
  padding.pad += one.pad;
}

void BubbleAccounting::add_phase(const std::vector<double>& busy_seconds_per_worker) {
  double longest = 0;
  double busy = 0;
  for (double seconds : busy_seconds_per_worker) {
    check_seconds(seconds, "busy seconds");
    longest = std::max(longest, seconds);
    busy += seconds;
  }
  if (longest <= 0) return;
  const double capacity = longest * static_cast<double>(busy_seconds_per_worker.size());
  MutexLock lock(mutex_);
  skew_idle_ += capacity - busy;
  skew_capacity_ += capacity;
}

void BubbleAccounting::add_sorting_wait(double seconds) {
  check_seconds(seconds, "sorting wait");
  MutexLock lock(mutex_);
  sorting_seconds_ += seconds;
}

void BubbleAccounting::add_idle(BubbleRole role, double seconds) {
  check_seconds(seconds, "idle seconds");
  MutexLock lock(mutex_);
  (role == BubbleRole::kRollout ? rollout_idle_seconds_ : trainer_idle_seconds_) += seconds;
}

void BubbleAccounting::add_staleness(int64_t versions_behind, int64_t rows) {
  check_input(versions_behind >= 0 && rows >= 0,
              "staleness needs versions_behind >= 0 and rows >= 0 (got " +
                  std::to_string(versions_behind) + ", " + std::to_string(rows) + ")",
              kInput);
  if (rows == 0) return;
  MutexLock lock(mutex_);
  staleness_[versions_behind] += rows;
}

nlohmann::json BubbleAccounting::to_json(double wall_seconds) const {
  check_seconds(wall_seconds, "wall seconds");
  MutexLock lock(mutex_);
  const auto fraction = [](const Padding& p) {
    return ratio(static_cast<double>(p.pad), static_cast<double>(p.slots));
  };
  nlohmann::json histogram = nlohmann::json::object();
  for (const auto& [versions, rows] : staleness_) histogram[std::to_string(versions)] = rows;
  return {
      {"padding", ratio(static_cast<double>(rollout_padding_.pad + train_padding_.pad),
                        static_cast<double>(rollout_padding_.slots + train_padding_.slots))},
      {"padding_rollout", fraction(rollout_padding_)},
      {"padding_train", fraction(train_padding_)},
      {"skewness", ratio(skew_idle_, skew_capacity_)},
      {"sorting", ratio(sorting_seconds_, wall_seconds)},
      {"trainer_idle", ratio(trainer_idle_seconds_, wall_seconds * trainer_workers_)},
      {"rollout_idle", ratio(rollout_idle_seconds_, wall_seconds * rollout_workers_)},
      {"staleness_histogram", std::move(histogram)},
  };
}

void BubbleAccounting::reset() {
  MutexLock lock(mutex_);
  rollout_padding_ = {};
  train_padding_ = {};
  skew_idle_ = 0;
  skew_capacity_ = 0;
  sorting_seconds_ = 0;
  rollout_idle_seconds_ = 0;
  trainer_idle_seconds_ = 0;
  staleness_.clear();
}

}  // namespace aspen::report
