#include "aspen/pipeline/staleness_window.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "aspen/pipeline/imports.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {

int64_t staleness_eta(const TrainConfig& config) {
  return config.pipeline.mode == PipelineMode::kAsync ? config.pipeline.max_staleness : 0;
}

int64_t admissible_groups(int64_t published_version, int64_t eta, int64_t batch_groups,
                          int64_t trained_groups, const ConsumerBacklog& batch_backlog,
                          int64_t group_size, int64_t extra_groups) {
  check_input(group_size >= 1 && batch_groups >= 1,
              "group size " + std::to_string(group_size) + ", batch " +
                  std::to_string(batch_groups) + " groups",
              "admissible_groups", "both >= 1");
  // A batch being trained holds its groups leased until the update acks them: they are
  // not trained yet either.
  const int64_t waiting = batch_backlog.groups + batch_backlog.leased_rows / group_size;
  const int64_t bound = (published_version + eta + 1) * batch_groups + extra_groups;
  return std::max<int64_t>(0, bound - trained_groups - waiting);
}

ClaimOptions batch_claim_options(int64_t index, int64_t eta, int64_t groups_wanted,
                                 int64_t group_size, bool whole, bool abort_stragglers) {
  check_input(group_size >= 1 && groups_wanted >= 1,
              "group size " + std::to_string(group_size) + ", " +
                  std::to_string(groups_wanted) + " groups wanted",
              "batch_claim_options", "both >= 1");
  ClaimOptions options;
  options.whole_groups = true;
  options.max_rows = groups_wanted * group_size;
  options.min_rows = whole ? groups_wanted * group_size : 1;
  if (abort_stragglers) {
    options.min_version = oldest_trainable_version(index, eta);
  } else {
    options.required_through_version = index - eta;
    options.complete_window = whole;
  }
  return options;
}

int64_t over_sample_groups(const TrainConfig& config) {
  const double extra =
      config.pipeline.over_sample * static_cast<double>(config.rollout.prompts_per_iteration);
  return static_cast<int64_t>(std::ceil(extra - 1e-9));
}

int64_t oldest_trainable_version(int64_t next_index, int64_t eta) { return next_index - eta; }

bool is_straggler(int64_t admitted_version, int64_t next_index, int64_t eta) {
  return admitted_version < oldest_trainable_version(next_index, eta);
}

bool streams_updates(const TrainConfig& config) {
  const AlgorithmName name = config.algorithm.name;
  const int64_t rows = config.rollout.prompts_per_iteration * config.rollout.n;
  return config.pipeline.mode == PipelineMode::kAsync && config.pipeline.stream_updates &&
         !config.algorithm.dynamic_sampling && config.train.epochs == 1 &&
         (config.train.mini_batch_size <= 0 || config.train.mini_batch_size >= rows) &&
         name != AlgorithmName::kPpo && !config.algorithm.kl_in_reward &&
         (name == AlgorithmName::kGrpo || name == AlgorithmName::kDapo ||
          name == AlgorithmName::kDrGrpo || name == AlgorithmName::kRloo);
}

}  // namespace aspen::pipeline
