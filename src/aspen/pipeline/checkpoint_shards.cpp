#include "aspen/pipeline/checkpoint_shards.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "aspen/io/safetensors.h"
#include "aspen/model/expert_parallel_state.h"
#include "aspen/model/tp_layout.h"
#include "aspen/pipeline/imports.h"
#include "aspen/train/optimizer.h"
#include "aspen/util/error.h"

namespace aspen::pipeline {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStepCount = "optimizer.step_count";

std::string experts_file(int rank, int size) {
  char name[64];
  std::snprintf(name, sizeof(name), "experts-%05d-of-%05d.safetensors", rank, size);
  return name;
}

// The experts files of `dir` (rank -> path); aspen::Error naming `dir` unless they are
// one complete set (or none: a layout without expert parallelism over TP).
std::map<int, fs::path> experts_files(const fs::path& dir) {
  std::map<int, fs::path> files;
  int size = -1;
  for (const auto& entry : fs::directory_iterator(dir)) {
    int r = 0, p = 0;
    char tail[32] = {0};
    const std::string name = entry.path().filename().string();
    if (std::sscanf(name.c_str(), "experts-%5d-of-%5d%31s", &r, &p, tail) != 3 ||
        name != experts_file(r, p)) {
      continue;
    }
    check_input(size == -1 || size == p,
                "holds experts files of " + std::to_string(size) + " and of " +
                    std::to_string(p) + " ranks",
                dir.string());
    size = p;
    files[r] = entry.path();
  }
  for (int r = 0; r < size; ++r) {
    check_input(files.count(r) == 1, "lacks " + experts_file(r, size), dir.string(),
                "every rank of an expert-parallel TP group writes its experts' file");
  }
  return files;
}

// `tensor` as `held` says (a view when it is whole or replicated, copied either way).
torch::Tensor cut(const torch::Tensor& tensor, const ShardHolding& held, const std::string& what) {
  return take_shard(tensor, held.spec, held.rank, held.size, what).clone();
}

}  // namespace

HoldingOf parameter_holding(const QwenForCausalLM& model) {
  std::set<std::string> held;
  for (const auto& item : model->hf_state()) held.insert(item.first);
  const ModelConfig config = model->config;
  const TensorParallel tp = model->tp;
  const bool experts_whole = model->ep.enabled();
  return [held, config, tp, experts_whole](const std::string& name) -> std::optional<ShardHolding> {
    if (held.count(name) == 0) return std::nullopt;
    if (!tp.enabled() || (experts_whole && is_expert_parameter(name))) return ShardHolding{};
    return ShardHolding{qwen_shard_spec(name, config), tp.rank, tp.size};
  };
}

HoldingOf optimizer_state_holding(const QwenForCausalLM& model) {
  const HoldingOf parameters = parameter_holding(model);
  const ShardHolding replicated{{}, model->tp.rank, model->tp.size};
  return [parameters, replicated](const std::string& name) -> std::optional<ShardHolding> {
    if (name == kStepCount) return replicated;
    const std::optional<StateEntryOwner> owner = state_entry_owner(name);
    if (!owner) return std::nullopt;
    std::optional<ShardHolding> held = parameters(owner->parameter);
    // A step counter goes where its parameter's moments go: with them when the
    // parameter is this rank's alone, replicated beside its shards otherwise.
    if (held && !owner->shaped && held->size > 1) held = replicated;
    return held;
  };
}

HoldingOf whole_holding() {
  return [](const std::string&) { return std::optional<ShardHolding>(ShardHolding{}); };
}

void write_rank_shards(const std::string& dir,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const HoldingOf& holding, int tp_rank, int tp_size) {
  std::vector<ShardedTensor> split;
  std::vector<std::pair<std::string, torch::Tensor>> whole;
  for (const auto& [name, tensor] : tensors) {
    const std::optional<ShardHolding> held = holding(name);
    check_input(held.has_value(), "no tensor-parallel holding for " + name, dir);
    if (held->size == 1) {
      whole.emplace_back(name, tensor.detach());
    } else {
      split.push_back({name, tensor.detach(), held->spec});
    }
  }
  save_sharded(dir, split, tp_rank, tp_size);
  if (!whole.empty()) {
    write_safetensors((fs::path(dir) / experts_file(tp_rank, tp_size)).string(), whole);
  }
}

std::string stage_shards_dir(const std::string& dir, int stage, int stages) {
  char name[64];
  std::snprintf(name, sizeof(name), "stage-%05d-of-%05d", stage, stages);
  return (fs::path(dir) / name).string();
}

std::map<std::string, torch::Tensor> read_rank_shards(const std::string& dir,
                                                      const HoldingOf& holding) {
  // Pipeline stages that are tensor-parallel: one state directory per stage, each
  // with the names of its stage's layers (the step counter in every one).
  std::map<int, std::string> stages;
  int count = -1;
  for (const auto& entry : fs::directory_iterator(dir)) {
    int s = 0, p = 0;
    char tail[8] = {0};
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() ||
        std::sscanf(name.c_str(), "stage-%5d-of-%5d%7s", &s, &p, tail) != 2 ||
        stage_shards_dir(dir, s, p) != entry.path().string()) {
      continue;
    }
    check_input(count == -1 || count == p,
                "holds the states of " + std::to_string(count) + " and of " + std::to_string(p) +
                    " pipeline stages",
                dir);
    count = p;
    stages[s] = entry.path().string();
  }
  if (count > 0) {
    std::map<std::string, torch::Tensor> out;
    for (int s = 0; s < count; ++s) {
      check_input(stages.count(s) == 1, "lacks " + stage_shards_dir(dir, s, count), dir,
                  "every stage of the first pipeline writes its own directory");
      for (auto& item : read_rank_shards(stages.at(s), holding)) out.insert(std::move(item));
    }
    return out;
  }
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, tensor] :
       load_sharded(dir, [&](const std::string& name, const ShardSpec&) { return holding(name); })) {
    out.emplace(name, std::move(tensor));
  }
  for (const auto& [rank, path] : experts_files(dir)) {
    for (const auto& [name, tensor] : load_safetensors(path.string())) {
      const std::optional<ShardHolding> held = holding(name);
      if (!held) continue;
      check_input(out.emplace(name, cut(tensor, *held, path.string() + ": " + name)).second,
                  "holds " + name + " a second time", path.string());
    }
  }
  return out;
}

std::map<std::string, torch::Tensor> as_held(const std::map<std::string, torch::Tensor>& whole,
                                             const HoldingOf& holding, const std::string& source) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, tensor] : whole) {
    const std::optional<ShardHolding> held = holding(name);
    if (held) out.emplace(name, cut(tensor, *held, source + ": " + name));
  }
  return out;
}

}  // namespace aspen::pipeline
