#include "aspen/parallel/pipeline_stages.h"

#include <string>

#include "aspen/parallel/imports.h"
#include "aspen/util/error.h"

namespace aspen::parallel {

LayerRange stage_layers(int64_t num_layers, int stages, int stage, const std::string& what) {
  check_input(stages >= 1 && stages <= num_layers,
              "cannot split " + std::to_string(num_layers) + " decoder layers into " +
                  std::to_string(stages) + " pipeline stages (each stage needs a layer)",
              what);
  check_input(stage >= 0 && stage < stages,
              "stage " + std::to_string(stage) + " is not in [0, " + std::to_string(stages) + ")",
              what);
  const int64_t base = num_layers / stages;
  const int64_t extra = num_layers % stages;  // the first `extra` stages take one more
  const int64_t begin = stage * base + std::min<int64_t>(stage, extra);
  return {begin, begin + base + (stage < extra ? 1 : 0)};
}

PipelineStages PipelineStages::over(ProcessGroupHandle group) {
  PipelineStages pp;
  pp.size = group.world_size();
  pp.stage = group.rank();
  if (pp.size > 1) {
    pp.ends_group = group.new_subgroup({0, pp.size - 1});
    pp.group = std::move(group);
  }
  return pp;
}

void PipelineStages::validate(const std::string& what) const {
  check_input(size >= 1 && stage >= 0 && stage < size,
              "PP stage " + std::to_string(stage) + " is not in [0, " + std::to_string(size) + ")",
              what);
  if (size == 1) return;
  check_input(group.has_value(), "PP size " + std::to_string(size) + " needs a process group",
              what);
  check_input(group->world_size() == size && group->rank() == stage,
              "the process group has rank " + std::to_string(group->rank()) + " of " +
                  std::to_string(group->world_size()) + ", the PP context says stage " +
                  std::to_string(stage) + " of " + std::to_string(size),
              what);
}

ProcessGroupHandle PipelineStages::require_group(const std::string& what) const {
  check_input(group.has_value(), "needs a pipeline-parallel process group (PP size > 1)", what);
  return *group;
}

void PipelineStages::sum_tied_gradient(torch::Tensor& gradient) const {
  if (!enabled()) return;
  check_input(first() || last(), "only the first and the last stage hold the tied embedding",
              "pipeline stage " + std::to_string(stage));
  check_input(ends_group.has_value(), "the context has no {first, last} group (build it with over)",
              "pipeline stage " + std::to_string(stage));
  ProcessGroupHandle ends = *ends_group;
  ends.all_reduce_sum(gradient);
}

}  // namespace aspen::parallel
