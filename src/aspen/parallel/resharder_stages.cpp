// Resharder::exchange_stages: the pipeline-parallel step of the resharder (the
// placement and the plan are stated in resharder.h). After the TP step every rank holds
// inference shard s of its own stage's tensors; the stage group (one replica's PP ranks
// with the same training TP rank) then exchanges them so each ends with shard s of the
// whole model.
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "aspen/parallel/imports.h"
#include "aspen/parallel/object_collectives.h"
#include "aspen/parallel/resharder.h"
#include "aspen/parallel/shard_assembly.h"
#include "aspen/util/error.h"

namespace aspen::parallel {
namespace resharder_stages {

// Point-to-point messages only copy bytes, so bfloat16 travels as float16: the 16-bit
// type every Gloo build has a kernel for (as the gather case does).
torch::ScalarType on_wire(torch::ScalarType dtype) {
  return dtype == torch::kBFloat16 ? torch::kHalf : dtype;
}

// The shape of `target` of `size` of a tensor of shape `full` (replicated: full).
std::vector<int64_t> shard_shape(const ShardSpec& spec, const std::vector<int64_t>& full,
                                 int target, int size, const std::string& name) {
  std::vector<int64_t> shape = full;
  if (!spec.replicated()) {
    auto& extent = shape[static_cast<size_t>(spec.dim)];
    extent = shard_range(spec, extent, target, size, name).length;
  }
  return shape;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// One stage's tensors as the plan sees them: names and full shapes, in the stage's order.
struct StageTensor {
  std::string name;
  std::vector<int64_t> full;
};

}  // namespace resharder_stages

std::shared_ptr<WeightSet> Resharder::exchange_stages(
    const std::vector<std::pair<std::string, torch::Tensor>>& train_shards,
    const WeightSet& stage_weights) {
  using resharder_stages::StageTensor;
  ProcessGroupHandle& group = *stage_group_;
  const int stages = plan_.train_pp;
  // 1. The plan: every stage's names and full shapes (small JSON, one broadcast each).
  std::vector<std::vector<StageTensor>> tensors(static_cast<size_t>(stages));
  for (int t = 0; t < stages; ++t) {
    nlohmann::json listing = nlohmann::json::array();
    if (t == stage_) {
      for (const auto& [name, shard] : train_shards) {
        listing.push_back({name, full_shape(layout_(name), shard.sizes(), plan_.train_tp, name)});
      }
    }
    broadcast_json(group, listing, t);
    for (const auto& entry : listing) {
      tensors[static_cast<size_t>(t)].push_back(
          {entry[0].get<std::string>(), entry[1].get<std::vector<int64_t>>()});
    }
  }
  // A name several stages hold (the tied embedding) is owned by the first, and sent
  // only to stages that do not hold it: the last stage keeps its own copy.
  std::vector<std::vector<const StageTensor*>> owned(static_cast<size_t>(stages));
  std::vector<std::set<std::string>> held(static_cast<size_t>(stages));
  std::set<std::string> seen;
  for (int t = 0; t < stages; ++t) {
    for (const auto& tensor : tensors[static_cast<size_t>(t)]) {
      held[static_cast<size_t>(t)].insert(tensor.name);
      if (seen.insert(tensor.name).second) owned[static_cast<size_t>(t)].push_back(&tensor);
    }
  }
  // What stage `from` sends stage `to`: its owned tensors that `to` does not hold.
  auto sent = [&](int from, int to) {
    std::vector<const StageTensor*> list;
    for (const StageTensor* tensor : owned[static_cast<size_t>(from)]) {
      if (held[static_cast<size_t>(to)].count(tensor->name) == 0) list.push_back(tensor);
    }
    return list;
  };
  std::map<std::string, torch::Tensor> mine(stage_weights.tensors.begin(),
                                            stage_weights.tensors.end());
  std::map<std::string, torch::Tensor> train_shard(train_shards.begin(), train_shards.end());
  // Member u's inference TP rank (group rank = stage; same dp_index and r as this rank).
  const int stage_stride = plan_.train_tp;
  const int first_member = rank_ - stage_ * stage_stride;
  auto target_of = [&](int u) {
    return inference_placement(plan_, first_member + u * stage_stride).tp_rank;
  };
  const torch::ScalarType wire = resharder_stages::on_wire(plan_.dtype);
  const torch::Device device =
      train_shards.empty() ? torch::Device(torch::kCPU) : train_shards.front().second.device();
  // 2. Send member u shard target_of(u) of what it needs from this stage, one flat buffer.
  std::vector<PendingWork> sends;
  for (int u = 0; u < stages; ++u) {
    const auto list = sent(stage_, u);
    if (u == stage_ || list.empty()) continue;
    const int target = target_of(u);
    std::vector<torch::Tensor> pieces;
    for (const StageTensor* tensor : list) {
      torch::Tensor piece;
      if (target == placement_.tp_rank) {
        piece = mine.at(tensor->name);
      } else {
        // Split case: u's shard lies inside this rank's training shard (same r).
        check_input(plan_.infer_tp > plan_.train_tp, "a stage peer needs another shard",
                    tensor->name);
        piece = assemble_shard(
            layout_(tensor->name), tensor->full,
            {{train_shard.at(tensor->name).detach(), train_tp_rank_, plan_.train_tp}}, target,
            plan_.infer_tp, plan_.dtype, tensor->name);
      }
      pieces.push_back(piece.contiguous().view({-1}));
    }
    sends.push_back(group.send_async(torch::cat(pieces).view(wire), u));
  }
  // 3. Receive this rank's shard of every other stage's owned tensors; sizes come from
  // the plan, so no header travels.
  std::vector<std::map<std::string, torch::Tensor>> received(static_cast<size_t>(stages));
  for (int t = 0; t < stages; ++t) {
    const auto list = sent(t, stage_);
    if (t == stage_ || list.empty()) continue;
    int64_t total = 0;
    std::vector<std::vector<int64_t>> shapes;
    for (const StageTensor* tensor : list) {
      shapes.push_back(resharder_stages::shard_shape(
          layout_(tensor->name), tensor->full, placement_.tp_rank, plan_.infer_tp, tensor->name));
      total += resharder_stages::numel_of(shapes.back());
    }
    // On the shards' device, as the sender's buffer is (NCCL moves CUDA tensors).
    torch::Tensor flat = torch::empty({total}, torch::TensorOptions().dtype(wire).device(device));
    group.recv(flat, t);
    flat = flat.view(plan_.dtype);
    stats_.bytes_moved += flat.numel() * flat.element_size();
    int64_t offset = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const int64_t n = resharder_stages::numel_of(shapes[i]);
      received[static_cast<size_t>(t)][list[i]->name] = flat.narrow(0, offset, n).view(shapes[i]);
      offset += n;
    }
  }
  for (auto& work : sends) work.wait();
  // 4. The whole model's shard, stage by stage, each tensor once.
  auto weights = std::make_shared<WeightSet>();
  for (int t = 0; t < stages; ++t) {
    for (const StageTensor* tensor : owned[static_cast<size_t>(t)]) {
      const bool local = held[static_cast<size_t>(stage_)].count(tensor->name) > 0;
      weights->tensors.emplace_back(
          tensor->name,
          local ? mine.at(tensor->name) : received[static_cast<size_t>(t)].at(tensor->name));
    }
  }
  return weights;
}

}  // namespace aspen::parallel
