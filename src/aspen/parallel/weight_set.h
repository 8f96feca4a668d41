// A versioned set of inference-layout weights, and the board it is published on.
//
// The resharder produces one WeightSet per publish: the tensors one inference rank
// needs (its TP shard, in the compute dtype, HF names), stamped with the policy
// version that produced them. Rollout instances read `latest()` at a step boundary
// and switch when the version changed; a set is immutable once published, so an
// instance may keep using the previous one while a newer one is being built.
// Thread safety: WeightBoard is safe to use from any number of threads.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace aspen {

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

class WeightBoard {
 public:
  void publish(std::shared_ptr<const WeightSet> weights) {
    std::lock_guard<std::mutex> lock(mutex_);
    latest_ = std::move(weights);
  }
  // The most recently published set; null before the first publish.
  std::shared_ptr<const WeightSet> latest() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return latest_;
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const WeightSet> latest_;
};

}  // namespace aspen
