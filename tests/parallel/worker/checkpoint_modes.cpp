// Sharded-checkpoint rank programs:
//   ckpt_save DIR KV_HEADS
//       TP = world size: every rank saves its shards of the seeded tiny model
//       (tiny_qwen.h) into DIR with save_sharded, then barriers; prints
//       "rank R saved".
#include <cstdio>
#include <string>

#include "aspen/model/tp_layout.h"
#include "aspen/parallel/sharded_checkpoint.h"
#include "aspen/util/error.h"
#include "tiny_qwen.h"
#include "worker_mode.h"

namespace aspen::testing {

using namespace aspen::model;
using namespace aspen::parallel;
namespace {

int ckpt_save(ProcessGroupHandle& group, const std::vector<std::string>& args) {
  check_input(args.size() == 2, "expected DIR KV_HEADS", "ckpt_save");
  const ModelConfig config = tiny_tp_config(std::stoi(args[1]));
  std::vector<ShardedTensor> shards;
  for (const auto& [name, tensor] : seeded_full_weights(config)) {
    const ShardSpec spec = qwen_shard_spec(name, config);
    shards.push_back(
        {name, take_shard(tensor, spec, group.rank(), group.world_size(), name), spec});
  }
  save_sharded(args[0], shards, group.rank(), group.world_size());
  group.barrier();
  std::printf("rank %d saved\n", group.rank());
  return 0;
}

const RegisterWorkerMode kCkptSave({"ckpt_save", "ckpt_save DIR KV_HEADS", ckpt_save});

}  // namespace
}  // namespace aspen::testing
