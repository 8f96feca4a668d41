// The resharder: MindSpeed-RL's "allgather" half of allgather-swap. It turns the
// training layout (DP x PP x TP_train ranks, fp32 master shards) into the inference
// layout (TP_infer, compute dtype) and returns this rank's inference shard of the WHOLE
// model as a versioned WeightSet (parallel/weight_set.h).
//
// Placement (colocated: every process is a training rank AND an inference rank):
//   world rank p = dp_index * (PP * TP_train) + stage * TP_train + r (TP fastest, then
//   the pipeline stages, as Megatron orders ranks and parallel/placement.h states);
//   column c = dp_index * PP + stage (one stage's TP_train ranks of one replica; c =
//   dp_index without PP).
//   TP_infer divides TP_train (k = TP_train / TP_infer, gather case):
//     inference TP rank s = r / k; the k training ranks {column c's s*k + j}
//     together hold exactly inference shard s of their stage, so they form one gather
//     subgroup and all-gather ONLY their own shards (in the compute dtype, one flat
//     buffer per publish): each rank receives (k-1)/k of its inference shard, never the
//     model. Replicated tensors (norms) and blocks the subgroup holds as replicas are
//     not sent. Inference replica = c * k + r % k.
//   TP_infer a multiple of TP_train (k = TP_infer / TP_train, split case):
//     inference TP rank s = r * k + c % k; its shard lies inside the training
//     shard it already holds, so it is sliced locally: zero bytes move. Needs
//     world % TP_infer == 0 (whole inference groups). Inference replica = c / k.
//   Pipeline stages (PP > 1, resharder_stages.cpp): each rank first does the step above
//   for its own stage's tensors; then the PP ranks of one replica with the same r (the
//   "stage group") exchange: stage t sends member u inference shard s(u) of the tensors
//   t owns, so every rank ends with shard s of every layer (a rollout instance needs
//   them all). In the gather case s(u) is the shard t already assembled; in the split
//   case t slices s(u) from its training shard. The plan is computed from names: every
//   stage broadcasts its tensors' names and full shapes (a few KB); a name several
//   stages hold (the tied embedding: a copy on the last stage) is taken from the first
//   holder by stages without one, and the last stage keeps its own copy, so it is never
//   sent twice. Only inference shards move; bytes_moved counts them.
//   Output order: stage 0's tensors, then stage 1's, ... (each stage's in its order).
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
  int train_pp = 1;  // pipeline stages of a training replica (last: positional inits stay valid)

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
  // world: the group of all train_dp * train_pp * train_tp ranks; nullopt for one
  // process (all three 1). Collective: creates the gather and stage subgroups.
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
  // PP > 1: this stage's inference shards -> the whole model's (resharder_stages.cpp).
  std::shared_ptr<WeightSet> exchange_stages(
      const std::vector<std::pair<std::string, torch::Tensor>>& train_shards,
      const WeightSet& stage_weights);

  ReshardPlan plan_;
  ShardLayout layout_;
  int rank_ = 0;
  int train_tp_rank_ = 0;
  InferencePlacement placement_;
  std::optional<ProcessGroupHandle> gather_group_;  // gather case with k > 1
  std::optional<ProcessGroupHandle> stage_group_;   // PP > 1: group rank = stage
  int stage_ = 0;
  ReshardStats stats_;
};

}  // namespace aspen::parallel
