#include "aspen/parallel/resharder.h"

#include <chrono>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/shard_assembly.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"

namespace aspen::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// An all-gather only copies bytes, so bfloat16 payloads travel reinterpreted as
// float16: the 16-bit type every Gloo build has a kernel for.
torch::ScalarType wire_dtype(torch::ScalarType dtype) {
  return dtype == torch::kBFloat16 ? torch::kHalf : dtype;
}

}  // namespace

void ReshardPlan::validate(int world_size) const {
  check_input(train_dp >= 1 && train_pp >= 1 && train_tp >= 1 && infer_tp >= 1,
              "train_dp, train_pp, train_tp and infer_tp must be >= 1", "reshard plan");
  check_input(train_dp * train_pp * train_tp == world_size,
              "train_dp x train_pp x train_tp = " +
                  std::to_string(train_dp * train_pp * train_tp) +
                  " does not equal the world size " + std::to_string(world_size),
              "reshard plan");
  check_input(train_tp % infer_tp == 0 || infer_tp % train_tp == 0,
              "infer_tp " + std::to_string(infer_tp) + " must divide or be a multiple of train_tp " +
                  std::to_string(train_tp),
              "reshard plan");
  check_input(world_size % infer_tp == 0,
              "infer_tp " + std::to_string(infer_tp) + " does not divide the world size " +
                  std::to_string(world_size) + " (inference groups must be whole)",
              "reshard plan");
}

InferencePlacement inference_placement(const ReshardPlan& plan, int rank) {
  const int r = rank % plan.train_tp;
  const int column = rank / plan.train_tp;  // dp_index * train_pp + stage
  InferencePlacement placement;
  if (plan.infer_tp <= plan.train_tp) {
    const int k = plan.train_tp / plan.infer_tp;
    placement.tp_rank = r / k;
    placement.replica = column * k + r % k;
  } else {
    const int k = plan.infer_tp / plan.train_tp;
    placement.tp_rank = r * k + column % k;
    placement.replica = column / k;
  }
  return placement;
}

Resharder::Resharder(std::optional<ProcessGroupHandle> world, ReshardPlan plan, ShardLayout layout)
    : plan_(plan), layout_(std::move(layout)) {
  const int world_size = world ? world->world_size() : 1;
  rank_ = world ? world->rank() : 0;
  plan_.validate(world_size);
  train_tp_rank_ = rank_ % plan_.train_tp;
  stage_ = (rank_ / plan_.train_tp) % plan_.train_pp;
  placement_ = inference_placement(plan_, rank_);
  const int k = plan_.train_tp / plan_.infer_tp;
  const int columns = plan_.train_dp * plan_.train_pp;
  // Every rank creates every subgroup, in the same order (c10d's rule).
  if (plan_.infer_tp < plan_.train_tp && k > 1) {
    for (int c = 0; c < columns; ++c) {
      for (int s = 0; s < plan_.infer_tp; ++s) {
        std::vector<int> members;
        for (int j = 0; j < k; ++j) members.push_back(c * plan_.train_tp + s * k + j);
        auto group = world->new_subgroup(members);
        if (group) gather_group_ = std::move(group);
      }
    }
  }
  if (plan_.train_pp > 1) {
    const int replica_size = plan_.train_pp * plan_.train_tp;
    for (int d = 0; d < plan_.train_dp; ++d) {
      for (int r = 0; r < plan_.train_tp; ++r) {
        std::vector<int> members;
        for (int t = 0; t < plan_.train_pp; ++t) {
          members.push_back(d * replica_size + t * plan_.train_tp + r);
        }
        auto group = world->new_subgroup(members);
        if (group) stage_group_ = std::move(group);
      }
    }
  }
}

std::shared_ptr<const WeightSet> Resharder::reshard(
    const std::vector<std::pair<std::string, torch::Tensor>>& train_shards, int64_t version) {
  const auto start = Clock::now();
  stats_ = {};
  std::shared_ptr<WeightSet> weights =
      gather_group_ ? gather_case(train_shards) : split_case(train_shards);
  if (stage_group_) weights = exchange_stages(train_shards, *weights);
  weights->version = version;
  weights->tp_rank = placement_.tp_rank;
  weights->tp_size = plan_.infer_tp;
  stats_.bytes_published = weights->bytes();
  stats_.seconds = seconds_since(start);
  return weights;
}

std::shared_ptr<WeightSet> Resharder::split_case(
    const std::vector<std::pair<std::string, torch::Tensor>>& train_shards) {
  auto weights = std::make_shared<WeightSet>();
  for (const auto& [name, shard] : train_shards) {
    const ShardSpec spec = layout_(name);
    const auto full = full_shape(spec, shard.sizes(), plan_.train_tp, name);
    weights->tensors.emplace_back(
        name, assemble_shard(spec, full, {{shard.detach(), train_tp_rank_, plan_.train_tp}},
                             placement_.tp_rank, plan_.infer_tp, plan_.dtype, name));
  }
  return weights;
}

std::shared_ptr<WeightSet> Resharder::gather_case(
    const std::vector<std::pair<std::string, torch::Tensor>>& train_shards) {
  const int k = gather_group_->world_size();
  const int first_member = placement_.tp_rank * k;  // training TP rank of subgroup rank 0
  // Which tensors differ across the subgroup (and so must travel): decided from the
  // layout alone, hence identically on every member.
  struct Item {
    ShardSpec spec;
    std::vector<int64_t> full;
    bool gathered = false;
    int64_t offset = 0;  // in the flat buffer, elements
  };
  std::vector<Item> items;
  std::vector<torch::Tensor> to_send;
  int64_t flat_elements = 0;
  for (const auto& [name, shard] : train_shards) {
    Item item;
    item.spec = layout_(name);
    item.full = full_shape(item.spec, shard.sizes(), plan_.train_tp, name);
    if (!item.spec.replicated()) {
      const int64_t extent = item.full[static_cast<size_t>(item.spec.dim)];
      const ShardRange first = shard_range(item.spec, extent, first_member, plan_.train_tp, name);
      const ShardRange last =
          shard_range(item.spec, extent, first_member + k - 1, plan_.train_tp, name);
      item.gathered = first.begin != last.begin;
    }
    if (item.gathered) {
      item.offset = flat_elements;
      flat_elements += shard.numel();
      to_send.push_back(shard.detach().to(plan_.dtype).contiguous().view({-1}));
    }
    items.push_back(std::move(item));
  }
  std::vector<torch::Tensor> gathered;
  if (!to_send.empty()) {
    torch::Tensor flat = torch::cat(to_send).view(wire_dtype(plan_.dtype));
    gathered = gather_group_->all_gather(flat);
    for (auto& part : gathered) part = part.view(plan_.dtype);
    stats_.bytes_moved = (k - 1) * flat.numel() * flat.element_size();
  }
  auto weights = std::make_shared<WeightSet>();
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& [name, shard] = train_shards[i];
    const Item& item = items[i];
    std::vector<SourceShard> sources;
    if (item.gathered) {
      for (int j = 0; j < k; ++j) {
        sources.push_back({gathered[static_cast<size_t>(j)]
                               .narrow(0, item.offset, shard.numel())
                               .view(shard.sizes()),
                           first_member + j, plan_.train_tp});
      }
    } else {
      sources.push_back({shard.detach(), train_tp_rank_, plan_.train_tp});
    }
    weights->tensors.emplace_back(name, assemble_shard(item.spec, item.full, sources,
                                                       placement_.tp_rank, plan_.infer_tp,
                                                       plan_.dtype, name));
  }
  return weights;
}

}  // namespace aspen::parallel
