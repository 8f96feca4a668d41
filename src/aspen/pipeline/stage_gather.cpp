#include "aspen/pipeline/stage_gather.h"

#include <set>
#include <utility>
#include <vector>

#include "aspen/model/expert_parallel_state.h"
#include "aspen/parallel/object_collectives.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {
namespace {

constexpr const char* kEmbedding = "model.embed_tokens.weight";

int64_t numel_of(const nlohmann::json& shape) {
  int64_t numel = 1;
  for (const auto& size : shape) numel *= size.get<int64_t>();
  return numel;
}

}  // namespace

bool stage_writes(const QwenForCausalLM& model, const std::string& name) {
  return model->pp.first() || name != kEmbedding;
}

std::map<std::string, torch::Tensor> gather_pipeline_stages(const QwenForCausalLM& model) {
  // PP x EP: each stage whole over its EP group first (as EP alone publishes), so every
  // EP rank's pipeline then exchanges whole stages; without EP this is hf_state().
  return gather_stage_tensors(model->pp, gather_expert_parallel_state(model));
}

std::map<std::string, torch::Tensor> gather_stage_tensors(
    const PipelineStages& pp, const std::vector<std::pair<std::string, torch::Tensor>>& held) {
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> whole;
  if (!pp.enabled()) {
    for (const auto& [name, tensor] : held) whole[name] = tensor.detach().clone();
    return whole;
  }
  ProcessGroupHandle group = pp.require_group("gather of the pipeline stages");
  // Every stage holds at least one decoder layer, hence a tensor on the model's device.
  const torch::Device device = held.front().second.device();
  for (int s = 0; s < pp.size; ++s) {
    // [name, shape, dtype] of each tensor stage s sends, in its hf_state order.
    nlohmann::json listing = nlohmann::json::array();
    std::vector<torch::Tensor> mine;
    if (s == pp.stage) {
      for (const auto& [name, tensor] : held) {
        if (!pp.first() && name == kEmbedding) continue;  // the tied head's copy
        listing.push_back({name, tensor.sizes().vec(), static_cast<int>(tensor.scalar_type())});
        mine.push_back(tensor.detach());
      }
    }
    broadcast_json(group, listing, s);
    std::set<int> dtypes;
    for (const auto& entry : listing) dtypes.insert(entry[2].get<int>());
    // One broadcast per dtype (fp32 master weights: one), not one per tensor.
    for (const int dtype : dtypes) {
      std::vector<size_t> picked;
      int64_t total = 0;
      for (size_t i = 0; i < listing.size(); ++i) {
        if (listing[i][2].get<int>() != dtype) continue;
        picked.push_back(i);
        total += numel_of(listing[i][1]);
      }
      torch::Tensor flat;
      if (s == pp.stage) {
        std::vector<torch::Tensor> parts;
        for (size_t i : picked) parts.push_back(mine[i].reshape({-1}));
        flat = torch::cat(parts).contiguous();
      } else {
        flat = torch::empty({total}, torch::TensorOptions()
                                         .dtype(static_cast<torch::ScalarType>(dtype))
                                         .device(device));
      }
      group.broadcast(flat, s);
      int64_t offset = 0;
      for (size_t i : picked) {
        const int64_t numel = numel_of(listing[i][1]);
        whole[listing[i][0].get<std::string>()] =
            flat.narrow(0, offset, numel).view(listing[i][1].get<std::vector<int64_t>>());
        offset += numel;
      }
    }
  }
  return whole;
}

}  // namespace aspen::pipeline
