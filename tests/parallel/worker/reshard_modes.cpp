// Resharding rank programs:
//   reshard TRAIN_DP TRAIN_TP INFER_TP KV_HEADS [TRAIN_PP TIED]
//       every rank builds the same seeded tiny Qwen model (the "full" weights), takes
//       its training shards (take_shard at TRAIN_TP) of its pipeline stage's tensors
//       (docs/design.md "Pipeline parallelism": its layers, the embedding on the first
//       stage, norm and head on the last, the tied embedding's copy on the last too),
//       reshards to INFER_TP in bf16 twice (versions 1 and 2), and checks the set holds
//       every tensor of the model once, EXACTLY the inference shard sliced from the full
//       weights. With TRAIN_PP > 1 it also checks bytes_moved against the count the
//       placement implies (its TP gather plus every other stage's tensors' inference
//       shard, the tied embedding once). Prints "rank R reshard ok tp_rank S bytes_moved B".
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "aspen/model/tp_layout.h"
#include "aspen/parallel/pipeline_stages.h"
#include "aspen/parallel/resharder.h"
#include "aspen/util/error.h"
#include "tiny_qwen.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::model;
using namespace aspen::parallel;
namespace {

// The stages holding `name` (model/qwen_model.h's placement on stages).
std::vector<int> holders(const std::string& name, const ModelConfig& config, int stages) {
  const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) == 0) {
    const int64_t layer = std::stoll(name.substr(prefix.size()));
    for (int t = 0; t < stages; ++t) {
      if (stage_layers(config.num_hidden_layers, stages, t, name).contains(layer)) return {t};
    }
  }
  if (name == "model.embed_tokens.weight") {
    if (config.tie_word_embeddings && stages > 1) return {0, stages - 1};
    return {0};
  }
  return {stages - 1};
}

// What this rank should receive: its TP gather (the split tensors its subgroup holds
// different blocks of) plus its inference shard of every tensor its stage does not hold
// (the last stage keeps its own copy of a tied embedding).
int64_t expected_bytes(const ReshardPlan& plan, int rank, int tp_rank,
                       const std::vector<std::pair<std::string, torch::Tensor>>& full,
                       const ModelConfig& config) {
  const int stage = (rank / plan.train_tp) % plan.train_pp;
  const int64_t element = 2;  // bf16
  int64_t bytes = 0;
  const int k = plan.infer_tp < plan.train_tp ? plan.train_tp / plan.infer_tp : 1;
  for (const auto& [name, tensor] : full) {
    const ShardSpec spec = qwen_shard_spec(name, config);
    const std::vector<int> stages = holders(name, config, plan.train_pp);
    const bool held = std::find(stages.begin(), stages.end(), stage) != stages.end();
    if (!held) bytes += take_shard(tensor, spec, tp_rank, plan.infer_tp, name).numel() * element;
    if (held && k > 1 && !spec.replicated()) {
      const int64_t extent = tensor.size(spec.dim);
      const int first = tp_rank * k;
      if (shard_range(spec, extent, first, plan.train_tp, name).begin !=
          shard_range(spec, extent, first + k - 1, plan.train_tp, name).begin) {
        bytes += (k - 1) * take_shard(tensor, spec, first, plan.train_tp, name).numel() * element;
      }
    }
  }
  return bytes;
}

int reshard(ProcessGroupHandle& group, const std::vector<std::string>& args) {
  check_input(args.size() == 4 || args.size() == 6,
              "expected TRAIN_DP TRAIN_TP INFER_TP KV_HEADS [TRAIN_PP TIED]", "reshard");
  ReshardPlan plan{std::stoi(args[0]), std::stoi(args[1]), std::stoi(args[2]), torch::kBFloat16};
  ModelConfig config = tiny_tp_config(std::stoi(args[3]));
  if (args.size() == 6) {
    plan.train_pp = std::stoi(args[4]);
    config.tie_word_embeddings = args[5] == "1";
  }
  const auto full = seeded_full_weights(config);
  const int train_rank = group.rank() % plan.train_tp;
  const int stage = (group.rank() / plan.train_tp) % plan.train_pp;
  std::vector<std::pair<std::string, torch::Tensor>> shards;
  for (const auto& [name, tensor] : full) {
    const std::vector<int> stages = holders(name, config, plan.train_pp);
    if (std::find(stages.begin(), stages.end(), stage) == stages.end()) continue;
    shards.emplace_back(name, take_shard(tensor, qwen_shard_spec(name, config),
                                         train_rank, plan.train_tp, name));
  }
  Resharder resharder(group, plan,
                      [&](const std::string& name) { return qwen_shard_spec(name, config); });
  for (int64_t version = 1; version <= 2; ++version) {
    const auto set = resharder.reshard(shards, version);
    check_input(set->version == version && set->tp_size == plan.infer_tp, "stamp", "reshard");
    check_input(set->tensors.size() == full.size(), "tensor count", "reshard");
    const std::map<std::string, torch::Tensor> got(set->tensors.begin(), set->tensors.end());
    check_input(got.size() == full.size(), "a tensor published twice", "reshard");
    for (size_t i = 0; i < full.size(); ++i) {
      const auto& [name, tensor] = full[i];
      const torch::Tensor expected =
          take_shard(tensor, qwen_shard_spec(name, config), set->tp_rank,
                     plan.infer_tp, name)
              .to(torch::kBFloat16);
      // Without PP the order is the training shards' (with PP: stage by stage).
      check_input(plan.train_pp > 1 || set->tensors[i].first == name, "tensor order", name);
      check_input(got.count(name) == 1 && torch::equal(got.at(name), expected),
                  "tensor differs from the sliced full weights", name);
    }
    if (plan.train_pp > 1) {
      const int64_t expected = expected_bytes(plan, group.rank(), set->tp_rank, full, config);
      check_input(resharder.last_stats().bytes_moved == expected,
                  "bytes_moved " + std::to_string(resharder.last_stats().bytes_moved) +
                      " != the plan's " + std::to_string(expected),
                  "reshard");
    }
  }
  std::printf("rank %d reshard ok tp_rank %d bytes_moved %lld\n", group.rank(),
              resharder.placement().tp_rank,
              static_cast<long long>(resharder.last_stats().bytes_moved));
  return 0;
}

const RegisterWorkerMode kReshard(
    {"reshard", "reshard TRAIN_DP TRAIN_TP INFER_TP KV_HEADS [TRAIN_PP TIED]", reshard});

}  // namespace
}  // namespace aspen::testing
