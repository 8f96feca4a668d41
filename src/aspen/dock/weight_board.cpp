#include "aspen/dock/weight_board.h"

#include <utility>

#include "aspen/dock/imports.h"
#include "aspen/util/error.h"

namespace aspen::dock {

void WeightBoard::publish(std::shared_ptr<const WeightSet> weights) {
  check_input(weights != nullptr, "no weights", "weight board publish");
  MutexLock lock(mutex_);
  latest_ = std::move(weights);
  chain_.clear();
  chain_bytes_ = 0;
}

void WeightBoard::publish(std::shared_ptr<const WeightSet> weights,
                          std::shared_ptr<const WeightDelta> delta) {
  check_input(weights != nullptr && delta != nullptr, "no weights or no delta",
              "weight board publish");
  MutexLock lock(mutex_);
  check_input(latest_ != nullptr && delta->from_version == latest_->version &&
                  delta->to_version == weights->version,
              "a delta from version " + std::to_string(delta->from_version) + " to " +
                  std::to_string(delta->to_version) + " does not lead from the board's version " +
                  (latest_ ? std::to_string(latest_->version) : std::string("(none)")) +
                  " to version " + std::to_string(weights->version),
              "weight board publish");
  latest_ = std::move(weights);
  chain_bytes_ += delta->bytes();
  chain_.push_back(std::move(delta));
  const int64_t full_bytes = latest_->bytes();
  while (!chain_.empty() && chain_bytes_ >= full_bytes) {
    chain_bytes_ -= chain_.front()->bytes();
    chain_.pop_front();
  }
}

std::shared_ptr<const WeightSet> WeightBoard::latest() const {
  MutexLock lock(mutex_);
  return latest_;
}

WeightUpdate WeightBoard::update(int64_t held) const {
  MutexLock lock(mutex_);
  WeightUpdate update;
  if (latest_ == nullptr || latest_->version <= held) return update;
  for (size_t i = 0; i < chain_.size(); ++i) {
    if (chain_[i]->from_version != held) continue;
    update.deltas.assign(chain_.begin() + static_cast<std::ptrdiff_t>(i), chain_.end());
    return update;
  }
  update.full = latest_;
  return update;
}

size_t WeightBoard::deltas_held() const {
  MutexLock lock(mutex_);
  return chain_.size();
}

}  // namespace aspen::dock
