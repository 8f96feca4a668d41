// Resharding rank programs:
//   reshard TRAIN_DP TRAIN_TP INFER_TP KV_HEADS
//       every rank builds the same seeded tiny Qwen model (the "full" weights), takes
//       its training shards (take_shard at TRAIN_TP), reshards to INFER_TP in bf16
//       twice (versions 1 and 2), and checks every tensor is EXACTLY the inference
//       shard sliced from the full weights; prints
//       "rank R reshard ok tp_rank S bytes_moved B".
#include <cstdio>
#include <string>

#include "aspen/model/tp_layout.h"
#include "aspen/parallel/resharder.h"
#include "aspen/util/error.h"
#include "tiny_qwen.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::model;
using namespace aspen::parallel;
namespace {

int reshard(ProcessGroupHandle& group, const std::vector<std::string>& args) {
  check_input(args.size() == 4, "expected TRAIN_DP TRAIN_TP INFER_TP KV_HEADS", "reshard");
  ReshardPlan plan{std::stoi(args[0]), std::stoi(args[1]), std::stoi(args[2]), torch::kBFloat16};
  const ModelConfig config = tiny_tp_config(std::stoi(args[3]));
  const auto full = seeded_full_weights(config);
  const int train_rank = group.rank() % plan.train_tp;
  std::vector<std::pair<std::string, torch::Tensor>> shards;
  for (const auto& [name, tensor] : full) {
    shards.emplace_back(name, take_shard(tensor, qwen_shard_spec(name, config),
                                         train_rank, plan.train_tp, name));
  }
  Resharder resharder(group, plan,
                      [&](const std::string& name) { return qwen_shard_spec(name, config); });
  for (int64_t version = 1; version <= 2; ++version) {
    const auto set = resharder.reshard(shards, version);
    check_input(set->version == version && set->tp_size == plan.infer_tp, "stamp", "reshard");
    check_input(set->tensors.size() == full.size(), "tensor count", "reshard");
    for (size_t i = 0; i < full.size(); ++i) {
      const auto& [name, tensor] = full[i];
      const torch::Tensor expected =
          take_shard(tensor, qwen_shard_spec(name, config), set->tp_rank,
                     plan.infer_tp, name)
              .to(torch::kBFloat16);
      check_input(set->tensors[i].first == name && torch::equal(set->tensors[i].second, expected),
                  "tensor differs from the sliced full weights", name);
    }
  }
  std::printf("rank %d reshard ok tp_rank %d bytes_moved %lld\n", group.rank(),
              resharder.placement().tp_rank,
              static_cast<long long>(resharder.last_stats().bytes_moved));
  return 0;
}

const RegisterWorkerMode kReshard(
    {"reshard", "reshard TRAIN_DP TRAIN_TP INFER_TP KV_HEADS", reshard});

}  // namespace
}  // namespace aspen::testing
