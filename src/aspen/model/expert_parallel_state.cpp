#include "aspen/model/expert_parallel_state.h"

#include "aspen/model/imports.h"
#include "aspen/util/error.h"

namespace aspen::model {
namespace {

constexpr const char* kExpertMarker = ".mlp.experts.";

// The expert index of an expert key and where its digits sit in the name.
struct ExpertKey {
  size_t digits_begin = 0;
  size_t digits_end = 0;
  int64_t index = 0;
};

bool parse_expert_key(const std::string& name, ExpertKey& key) {
  const size_t at = name.find(kExpertMarker);
  if (at == std::string::npos) return false;
  key.digits_begin = at + std::string(kExpertMarker).size();
  key.digits_end = name.find('.', key.digits_begin);
  if (key.digits_end == std::string::npos || key.digits_end == key.digits_begin) return false;
  key.index = 0;
  for (size_t i = key.digits_begin; i < key.digits_end; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    key.index = key.index * 10 + (name[i] - '0');
  }
  return true;
}

}  // namespace

bool is_expert_parameter(const std::string& hf_name) {
  ExpertKey key;
  return parse_expert_key(hf_name, key);
}

std::optional<int64_t> expert_index(const std::string& hf_name) {
  ExpertKey key;
  if (!parse_expert_key(hf_name, key)) return std::nullopt;
  return key.index;
}

std::vector<std::pair<std::string, torch::Tensor>> gather_expert_parallel_state(
    const QwenForCausalLM& model) {
  std::vector<std::pair<std::string, torch::Tensor>> state = model->hf_state();
  const ExpertParallel& ep = model->ep;
  if (!ep.enabled()) return state;
  const int64_t experts = model->config.moe.num_experts;
  const int64_t first = ep.first_local_expert(experts);
  const int64_t local = ep.local_expert_count(experts);

  std::vector<std::pair<std::string, torch::Tensor>> mine, full;
  for (auto& item : state) {
    (is_expert_parameter(item.first) ? mine : full).push_back(item);
  }
  if (mine.empty()) return state;
  std::vector<torch::Tensor> flat_parts;
  for (const auto& [name, tensor] : mine) flat_parts.push_back(tensor.detach().reshape(-1));
  const torch::Tensor flat = torch::cat(flat_parts);
  const std::vector<torch::Tensor> gathered = ProcessGroupHandle(*ep.group).all_gather(flat);
  for (int source = 0; source < ep.size; ++source) {
    const torch::Tensor& theirs = gathered.at(static_cast<size_t>(source));
    check_input(theirs.numel() == flat.numel(),
                "EP rank " + std::to_string(source) + " holds " + std::to_string(theirs.numel()) +
                    " expert values, this rank " + std::to_string(flat.numel()),
                "gathering the experts of an expert-parallel model");
    int64_t offset = 0;
    for (const auto& [name, tensor] : mine) {
      ExpertKey key;
      parse_expert_key(name, key);
      // Rank `source` holds, in this slot, expert first_of(source) + (index - first).
      const int64_t index = static_cast<int64_t>(source) * local + (key.index - first);
      const std::string renamed = name.substr(0, key.digits_begin) + std::to_string(index) +
                                  name.substr(key.digits_end);
      full.emplace_back(renamed, theirs.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
      offset += tensor.numel();
    }
  }
  return full;
}

}  // namespace aspen::model
