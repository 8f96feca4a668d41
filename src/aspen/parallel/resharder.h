// The resharder: MindSpeed-RL's "allgather" half of allgather-swap. It turns the
// training layout (DP x TP_train ranks, fp32 master shards) into the inference
// layout (TP_infer, compute dtype) and returns this rank's inference shard as a
// versioned WeightSet (parallel/weight_set.h).
//
// Placement (colocated: every process is a training rank AND an inference rank):
//   world rank p = dp_index * TP_train + r  (TP fastest, as Megatron orders ranks)
//   TP_infer divides TP_train (k = TP_train / TP_infer, gather case):
//     inference TP rank s = r / k; the k training ranks {dp_index*TP_train + s*k + j}
//     together hold exactly inference shard s, so they form one gather subgroup and
//     all-gather ONLY their own shards (in the compute dtype, one flat buffer per
//     publish): each rank receives (k-1)/k of its inference shard, never the model.
//     Replicated tensors (norms) and blocks the subgroup holds as replicas are not sent.
//   TP_infer a multiple of TP_train (k = TP_infer / TP_train, split case):
//     inference TP rank s = r * k + dp_index % k; its shard lies inside the training
//     shard it already holds, so it is sliced locally: zero bytes move. Needs
//     world % TP_infer == 0 (whole inference groups).
// The layout of each tensor comes from `layout(name)` (for Qwen: qwen_shard_spec),
// so nothing here knows the model.
//
// Contract of reshard(): collective over the world group - every rank calls it with
// its training shards of the same names in the same order. The result is exact:
// equal to take_shard(full tensor, spec, s, TP_infer) cast to the compute dtype.
// Errors: aspen::Error for a layout that does not fit the world size, or shards
// whose shapes do not match their layout. Thread safety: one thread per resharder.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/process_group.h"
#include "aspen/parallel/shard_spec.h"
#include "aspen/parallel/weight_set.h"

namespace aspen::parallel {

using ShardLayout = std::function<ShardSpec(const std::string& name)>;

struct ReshardPlan {
  int train_dp = 1;
  int train_tp = 1;
  int infer_tp = 1;
  torch::ScalarType dtype = torch::kBFloat16;  // inference compute dtype

  void validate(int world_size) const;  // aspen::Error naming the field
};

// Where world rank `rank` sits in the inference layout (see the placement above).
struct InferencePlacement {
  int tp_rank = 0;
  int replica = 0;  // which inference TP group (rollout instance) the rank belongs to
};
InferencePlacement inference_placement(const ReshardPlan& plan, int rank);

struct ReshardStats {
  double seconds = 0.0;
  int64_t bytes_moved = 0;      // bytes this rank received from other ranks
  int64_t bytes_published = 0;  // size of the WeightSet it produced
};

class Resharder {
 public:
  // world: the group of all train_dp * train_tp ranks; nullopt for one process
  // (train_dp = train_tp = 1). Collective: creates the gather subgroups.
  Resharder(std::optional<ProcessGroupHandle> world, ReshardPlan plan, ShardLayout layout);

  std::shared_ptr<const WeightSet> reshard(
      const std::vector<std::pair<std::string, torch::Tensor>>& train_shards, int64_t version);

  const ReshardStats& last_stats() const { return stats_; }
  const ReshardPlan& plan() const { return plan_; }
  InferencePlacement placement() const { return placement_; }

 private:
  std::shared_ptr<WeightSet> gather_case(
      const std::vector<std::pair<std::string, torch::Tensor>>& train_shards);
  std::shared_ptr<WeightSet> split_case(
      const std::vector<std::pair<std::string, torch::Tensor>>& train_shards);

  ReshardPlan plan_;
  ShardLayout layout_;
  int rank_ = 0;
  int train_tp_rank_ = 0;
  InferencePlacement placement_;
  std::optional<ProcessGroupHandle> gather_group_;  // gather case with k > 1
  ReshardStats stats_;
};

}  // namespace aspen::parallel
