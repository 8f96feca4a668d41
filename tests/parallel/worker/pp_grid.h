// The process grids of the pipeline-parallel worker modes: the world's W ranks as
// p = W / d pipeline stages of d ranks each, the d ranks of a stage forming its inner
// group - tensor-parallel ("tp"), data-parallel ("dp") or expert-parallel ("ep") - the
// way Megatron orders them (the inner dimension fastest): rank = stage * d + inner.
// The pipeline group of inner rank i is {i, d + i, 2d + i, ...}, so its rank s is stage
// s and p2p messages run between the same inner rank of adjacent stages.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "aspen/parallel/pipeline_stages.h"
#include "aspen/parallel/process_group.h"
#include "aspen/util/error.h"

namespace aspen::testing {

struct PpGrid {
  std::string kind;  // "" (PP over the whole world), "tp", "dp" or "ep"
  int inner_size = 1;
  int inner_rank = 0;
  std::optional<parallel::ProcessGroupHandle> inner;  // the stage's ranks (d > 1)
  parallel::PipelineStages pp;
};

// `layout`: "" or KIND + d (e.g. "tp2"). Collective over `world`: every rank creates
// every group, member or not.
inline PpGrid make_pp_grid(parallel::ProcessGroupHandle& world, const std::string& layout) {
  PpGrid grid;
  if (!layout.empty()) {
    grid.kind = layout.substr(0, 2);
    check_input((grid.kind == "tp" || grid.kind == "dp" || grid.kind == "ep") && layout.size() > 2,
                "expected tpN, dpN or epN", "pp grid layout " + layout);
    grid.inner_size = std::stoi(layout.substr(2));
  }
  const int d = grid.inner_size;
  const int world_size = world.world_size();
  check_input(d >= 1 && world_size % d == 0 && world_size / d >= 2,
              "needs at least 2 stages of " + std::to_string(d) + " ranks in " +
                  std::to_string(world_size),
              "pp grid layout " + layout);
  const int stages = world_size / d;
  grid.inner_rank = world.rank() % d;
  if (d > 1) {
    for (int s = 0; s < stages; ++s) {
      std::vector<int> ranks;
      for (int i = 0; i < d; ++i) ranks.push_back(s * d + i);
      auto group = world.new_subgroup(ranks);
      if (group) grid.inner = group;
    }
  }
  std::optional<parallel::ProcessGroupHandle> pipeline;
  for (int i = 0; i < d; ++i) {
    std::vector<int> ranks;
    for (int s = 0; s < stages; ++s) ranks.push_back(s * d + i);
    auto group = world.new_subgroup(ranks);
    if (group) pipeline = group;
  }
  grid.pp = parallel::PipelineStages::over(*pipeline);
  return grid;
}

}  // namespace aspen::testing
