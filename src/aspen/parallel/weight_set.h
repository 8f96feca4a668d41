// A versioned set of inference-layout weights, and the history of them one consumer
// takes in turn. (The board a trainer publishes them on, with deltas between versions,
// is the dock's: dock/weight_board.h.)
//
// The resharder produces one WeightSet per publish: the tensors one inference rank
// needs (its TP shard, in the compute dtype, HF names), stamped with the policy
// version that produced them. Rollout instances read `latest()` at a step boundary
// and switch when the version changed; a set is immutable once published, so an
// instance may keep using the previous one while a newer one is being built.
// WeightHistory keeps every published set a consumer has not passed yet, for the
// ranks of a tensor-parallel rollout instance that each hold their own shards: the
// leader picks a version, and every peer takes exactly that version of its shards,
// however many newer ones were published meanwhile.
// Thread safety: WeightHistory is safe to use from any threads.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aspen/parallel/imports.h"
#include "aspen/util/mutex.h"

namespace aspen::parallel {

struct WeightSet {
  int64_t version = 0;
  int tp_rank = 0;  // the inference TP rank these shards belong to
  int tp_size = 1;
  std::vector<std::pair<std::string, torch::Tensor>> tensors;

  int64_t bytes() const {
    int64_t total = 0;
    for (const auto& item : tensors) total += item.second.numel() * item.second.element_size();
    return total;
  }
};

// Sets by version for ONE consumer: publish adds; take(v) returns set v and forgets
// every older one (the consumer never goes back), keeping the newer ones.
class WeightHistory {
 public:
  void publish(std::shared_ptr<const WeightSet> weights) {
    MutexLock lock(mutex_);
    const int64_t version = weights->version;
    sets_[version] = std::move(weights);
    published_.notify_all();
  }
  // The newest version published; -1 before the first publish.
  int64_t latest_version() const {
    MutexLock lock(mutex_);
    return sets_.empty() ? -1 : sets_.rbegin()->first;
  }
  // Set `version` (null when it was never published or is already passed).
  std::shared_ptr<const WeightSet> take(int64_t version) {
    MutexLock lock(mutex_);
    return take_locked(version);
  }
  // take(version), waiting up to `timeout` while neither it nor a newer version is
  // published: a peer's own shards of a version may arrive a moment after its leader's
  // (each rank's trainer thread publishes its own). Null when it did not arrive.
  std::shared_ptr<const WeightSet> take_waiting(int64_t version,
                                                std::chrono::steady_clock::duration timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    MutexLock lock(mutex_);
    while ((sets_.empty() || sets_.rbegin()->first < version) &&
           std::chrono::steady_clock::now() < deadline) {
      published_.wait_until(mutex_, deadline);
    }
    return take_locked(version);
  }
  size_t size() const {
    MutexLock lock(mutex_);
    return sets_.size();
  }

 private:
  std::shared_ptr<const WeightSet> take_locked(int64_t version) REQUIRES(mutex_) {
    auto it = sets_.find(version);
    if (it == sets_.end()) return nullptr;
    std::shared_ptr<const WeightSet> set = it->second;
    sets_.erase(sets_.begin(), it);
    return set;
  }

  mutable Mutex mutex_;
  std::map<int64_t, std::shared_ptr<const WeightSet>> sets_ GUARDED_BY(mutex_);
  CondVar published_;
};

}  // namespace aspen::parallel
