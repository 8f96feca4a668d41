#include "aspen/train/trainer_data_parallel.h"

#include "aspen/train/dp_mini_batches.h"
#include "aspen/train/imports.h"
#include "aspen/train/mini_batches.h"
#include "aspen/util/error.h"

namespace aspen::train {

TrainerDataParallel::TrainerDataParallel(const DataParallelConfig& config, MasterWeights& master)
    : group_(config.group) {
  if (!group_) return;
  // Local losses use global denominators, so the global gradient is the plain SUM of
  // the local ones; averaging would shrink it by the world size.
  check_input(config.reducer.scale == GradientScale::kSum,
              "trainers normalise by global denominators and need summed gradients",
              "DataParallelOptions.scale", "use GradientScale::kSum");
  if (!config.is_expert) {
    broadcast_parameters(*group_, master.master(), /*root=*/0);
    master.publish();
    reducer_ = std::make_unique<GradientAllReducer>(*group_, master.master(), config.reducer);
    overlap_ = !master.separate();
    return;
  }
  NamedParams shared, experts;
  for (const auto& item : master.master()) {
    (config.is_expert(item.first) ? experts : shared).push_back(item);
  }
  broadcast_parameters(*group_, shared, /*root=*/0);
  std::optional<ProcessGroupHandle> expert_group = config.expert_group;
  if (expert_group) broadcast_parameters(*expert_group, experts, /*root=*/0);
  master.publish();
  reducer_ = std::make_unique<GradientAllReducer>(*group_, shared, config.reducer);
  if (expert_group && !experts.empty()) {
    expert_reducer_ = std::make_unique<GradientAllReducer>(*expert_group, experts, config.reducer);
  }
  overlap_ = false;  // the expert-parallel backward's collectives run unhooked
}

int64_t TrainerDataParallel::global_rows(int64_t local_rows) {
  return group_ ? all_reduce_sum(*group_, local_rows) : local_rows;
}

std::pair<int64_t, int64_t> TrainerDataParallel::global_counts(int64_t local_tokens,
                                                               int64_t local_rows) {
  if (!group_) return {local_tokens, local_rows};
  torch::Tensor counts = torch::tensor({local_tokens, local_rows}, torch::kInt64);
  group_->all_reduce_sum(counts);
  return {counts[0].item<int64_t>(), counts[1].item<int64_t>()};
}

std::vector<std::vector<int64_t>> TrainerDataParallel::mini_batches(
    int64_t local_rows, int64_t global_rows, int64_t mini_batch_size, bool shuffle, uint64_t seed,
    int64_t epoch) const {
  if (!group_) return mini_batch_rows(local_rows, mini_batch_size, shuffle, seed, epoch);
  return dp_mini_batch_rows(local_rows, global_rows, mini_batch_size, shuffle, seed, epoch);
}

void TrainerDataParallel::before_last_backward() {
  if (!reducer_ || !overlap_) return;
  reducer_->prepare_for_backward();
  armed_ = true;
}

void TrainerDataParallel::reduce_grads() {
  if (!reducer_) return;
  reducer_->finish();
  if (expert_reducer_) expert_reducer_->finish();
  if (armed_) buckets_overlapped_ += static_cast<int64_t>(reducer_->launched_during_backward());
  armed_ = false;
}

void TrainerDataParallel::sum_over_ranks(std::vector<double>& values) {
  if (!group_ || values.empty()) return;
  torch::Tensor sums = torch::tensor(values, torch::kFloat64);
  group_->all_reduce_sum(sums);
  for (size_t i = 0; i < values.size(); ++i) values[i] = sums[static_cast<int64_t>(i)].item<double>();
}

}  // namespace aspen::train
