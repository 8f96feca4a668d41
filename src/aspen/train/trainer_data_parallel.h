// The data-parallel side of a trainer (actor, critic): what a rank must share with the
// others so that DP = d trains exactly like one process on the union of the ranks' rows.
//
// Contract (parallel/data_parallel.h, "loss normalisation"):
//   - update(batch) gets this rank's LOCAL rows (e.g. its share of a dock claim with
//     balance_ranks = d). The number of optimizer steps is derived from the GLOBAL row
//     count (mini_batches(): dp_mini_batches.h), so every rank steps together.
//   - Each mini-batch's token and row denominators are the GLOBAL ones
//     (global_counts()), so the sum over ranks of the local losses is the global loss.
//   - Gradients are SUMMED over ranks (GradientAllReducer, kSum) before clipping and
//     the optimizer step: every rank then sees the same gradient, norm and update, and
//     the weights stay identical without further broadcasts.
//   - Metric sums are summed over ranks (sum_over_ranks()) so every rank reports the
//     same, global numbers.
// Overlap: with fp32 compute (compute model == master weights) the reducer's hooks are
// armed before the last micro-batch's backward and the bucket all-reduces run while it
// proceeds. With a separate bf16 compute copy the master weights are not in the
// autograd graph, so the fp32 master grads are all-reduced after the last backward
// (synchronously, bucketed): correct, but not overlapped.
// Expert parallelism (DataParallelConfig::is_expert set): the experts a rank holds are
// its own (other EP ranks hold other experts under other names), so their gradients
// are summed over `expert_group` - the ranks holding the same experts - and the rest
// over `group` as usual; each set is broadcast from the first rank of its group at
// construction. Overlap is off then (every reduction runs after the last backward).
// Disabled (no group): every method is the identity / a no-op and mini_batches() is
// mini_batch_rows(), so a single-rank trainer is bit-identical to one without DP.
// Construction broadcasts rank 0's master weights (and publishes them to the compute
// copy), so ranks need not build bit-identical models.
// Collectives: every rank must make the same calls in the same order (one trainer
// thread per rank). Errors: aspen::Error when ranks disagree on the parameters or a
// collective fails (e.g. a peer died).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aspen/parallel/data_parallel.h"
#include "aspen/parallel/process_group.h"
#include "aspen/train/imports.h"
#include "aspen/train/precision.h"

namespace aspen::train {

struct DataParallelConfig {
  std::optional<ProcessGroupHandle> group;  // the data-parallel group; none: single rank
  DataParallelOptions reducer;              // bucket size; scale must stay kSum (above)
  // Expert parallelism: which master parameters are this rank's experts (null: none),
  // and the ranks holding the same experts (none: this rank alone holds them).
  std::function<bool(const std::string& name)> is_expert;
  std::optional<ProcessGroupHandle> expert_group;
};

class TrainerDataParallel {
 public:
  // `master` must outlive this object (the reducer hooks its tensors).
  TrainerDataParallel(const DataParallelConfig& config, MasterWeights& master);

  bool enabled() const { return reducer_ != nullptr; }
  int rank() const { return group_ ? group_->rank() : 0; }
  int world_size() const { return group_ ? group_->world_size() : 1; }

  int64_t global_rows(int64_t local_rows);
  // (tokens, rows) of a mini-batch summed over ranks, in one collective.
  std::pair<int64_t, int64_t> global_counts(int64_t local_tokens, int64_t local_rows);
  // This rank's rows per optimizer step of `epoch` (dp_mini_batches.h).
  std::vector<std::vector<int64_t>> mini_batches(int64_t local_rows, int64_t global_rows,
                                                 int64_t mini_batch_size, bool shuffle,
                                                 uint64_t seed, int64_t epoch) const;
  // Call right before the step's last local backward (only overlaps with fp32 compute).
  void before_last_backward();
  // Call after the step's last backward and MasterWeights::accumulate_grads(), before
  // the optimizer step: master grads become the sum over ranks.
  void reduce_grads();
  // In place: every entry summed over ranks (fp64), in one collective.
  void sum_over_ranks(std::vector<double>& values);

  // Buckets launched by hooks during backward, summed over all steps so far (shows the
  // overlap happened; 0 without a group or with bf16 compute).
  int64_t buckets_overlapped() const { return buckets_overlapped_; }

 private:
  std::optional<ProcessGroupHandle> group_;
  std::unique_ptr<GradientAllReducer> reducer_;
  std::unique_ptr<GradientAllReducer> expert_reducer_;  // EP: experts over expert_group
  bool overlap_ = false;
  bool armed_ = false;
  int64_t buckets_overlapped_ = 0;
};

}  // namespace aspen::train
