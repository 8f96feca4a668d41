// WeightPublisher: how the trainers' weights reach the rollout instances, and the full
// policy (setup.model, which the board's weight set, evaluation, checkpoints and the
// export read) when something reads it. One part of the iteration engine
// (iteration_engine.h), which calls it between updates.
//
// Three layouts, fixed by the placement at construction:
//   - train.tp > 1 or train.ep > 1: the actor holds shards (TP) or this rank's experts
//     (EP); ensure_full_policy() makes the full policy again, collectively over the
//     trainers (TP) and the EP group. With neither, the actor trains the full policy
//     itself and gathers nothing. train.pp > 1: each stage holds its layers; every
//     stage gets the others' (stage_gather.h, collective over the pipeline group and,
//     under PP x EP, each stage's EP group), so every trainer holds the full policy and
//     serves it as below; with train.tp > 1 too each stage's TP group first gathers its
//     own layers' shards.
// The gather is lazy (allgather-swap's promise: only what the inference layout needs
// is gathered). The publisher knows which version `full` holds (version 0 at
// construction: the policy the actor was loaded from; full_policy_loaded() after a
// restore) and ensure_full_policy() gathers only when that is not the version asked
// for. Its readers call it first: publish() to the board (the path below that puts
// the full policy's set), and the run driver before an evaluation, a checkpoint's
// policy/ and final/ (rl_run.cpp). When the instances take resharded shards and no
// reader is due, an update gathers nothing.
//   - colocated tensor-parallel instances (allgather-swap, engine_layout.h's
//     instances_take_resharded_shards): publish() reshards the actor's trained shards
//     into this rank's inference shards, which its instance takes from own_shards();
//     nothing goes through the dock. train.pp > 1: each rank passes its own stage's
//     (TP-sharded) tensors and the resharder's stage step (plan.train_pp, from
//     Placement::reshard_plan) sends each rank its inference shard of the other
//     stages' layers, so every instance gets the whole model, not the gathered one.
//   - otherwise publish() puts the full policy's weight set on the dock's weight board,
//     in this rank's warehouse, where its instances (or rollout-only ranks) fetch it.
//     With pipeline.weight_sync: delta it also puts the delta from the set it
//     published last (dock/weight_delta.h), unless that delta is not smaller than the
//     set (then the set alone, which restarts the board's chain); instances fetch the
//     deltas after the version they hold (pipeline/weight_receiver.h). LoRA runs
//     publish their adapters without a delta (already 59x fewer bytes than the full
//     policy; fp32 weights move in nearly every element at every step, and the full
//     policy's fp32 delta measured 1.9-2.5x fewer bytes, docs/benchmarks.md "Delta
//     weight sync", so it would add little to that), and the resharding path above
//     stays full: the shards are exchanged between the trainers' own ranks and their
//     colocated instances by collectives, not fetched from a board.
// Collectives: a gathering ensure_full_policy() (and so a publish() to the board that
// gathers) and the resharding publish() are collective over the trainers; every trainer
// calls them in the same order, at the same versions. So whether a reader is due must
// follow from the config and the iteration index alone, never from rank-local state:
// then `full`'s version, and with it whether a call gathers, is the same on every
// trainer.
// Thread safety: the trainer's thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "aspen/config/train_config.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/model/qwen_model.h"
#include "aspen/parallel/process_group.h"
#include "aspen/parallel/resharder.h"
#include "aspen/parallel/weight_set.h"
#include "aspen/pipeline/engine_layout.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

class WeightPublisher {
 public:
  // `world_size`: 0 without a world (one process). `trainers`: the trainers' subgroup
  // (several trainers only).
  WeightPublisher(const TrainConfig& config, const ModelConfig& model_config,
                  const EngineLayout& layout, int world_size,
                  std::optional<ProcessGroupHandle> trainers);

  // Whether the actor holds less than the full policy (a stale `full` needs a gather).
  bool gathers_full_policy() const {
    return full_resharder_ != nullptr || gathers_experts_ || gathers_stages_;
  }
  // Whether ensure_full_policy(..., version) would gather: the actor holds less than
  // the full policy and `full` holds another version.
  bool full_policy_stale(int64_t version) const {
    return gathers_full_policy() && full_version_ != version;
  }
  // (Models are passed as their shared holders.) `full` becomes the policy `actor`
  // trained, version `version`, by a gather unless it already is (or the actor trains
  // `full` itself). Returns whether it gathered. Collective when it gathers (above).
  bool ensure_full_policy(QwenForCausalLM actor, QwenForCausalLM full, int64_t version);
  // `full` holds version `version` without a gather: the policy a resumed run loaded
  // from its checkpoint (and built its actor from).
  void full_policy_loaded(int64_t version) { full_version_ = version; }
  // Whether publish() reads `full` (the board's weight set): false when the instances
  // take resharded shards of the actor's own tensors.
  bool publishes_full_policy() const { return instance_resharder_ == nullptr; }

  // Makes version `version` of the policy available to the instances: `actor`'s shards
  // resharded for them, or `full`'s weight set on `dock`'s board (after
  // ensure_full_policy: a gather when `full` is stale).
  void publish(QwenForCausalLM actor, const QwenForCausalLM& full, int64_t version,
               TransferDock& dock);

  // The inference shards this rank's instances load (colocated tensor-parallel
  // instances); null otherwise.
  const std::shared_ptr<WeightHistory>& own_shards() const { return own_shards_; }
  // Bytes this rank received in the last reshard for its instances; nullopt when the
  // instances do not take resharded shards.
  std::optional<int64_t> reshard_bytes_moved() const;

  // The last publish to the dock's board: what an instance holding the version before
  // it fetches (`bytes`: the delta's, or the set's when published full), the set's
  // bytes, whether a delta went with it, and the seconds the delta took to encode.
  struct PublishStats {
    int64_t bytes = 0;
    int64_t set_bytes = 0;
    bool delta = false;
    double encode_s = 0;
  };
  const PublishStats& last_publish() const { return last_publish_; }

 private:
  // train.tp > 1: gathers the trained shards into the full policy.
  std::unique_ptr<Resharder> full_resharder_;
  // train.ep > 1: the actor holds this rank's experts.
  bool gathers_experts_ = false;
  // train.pp > 1: the actor holds this rank's pipeline stage.
  bool gathers_stages_ = false;
  // The version `full` holds when the actor holds less than it (above).
  int64_t full_version_ = 0;
  // The gather itself: `full` becomes the policy `actor` holds a part of.
  void gather_full_policy(QwenForCausalLM actor, QwenForCausalLM full, int64_t version);
  std::unique_ptr<Resharder> instance_resharder_;
  std::shared_ptr<WeightHistory> own_shards_;
  int64_t reshard_bytes_moved_ = 0;
  WeightSync weight_sync_ = WeightSync::kFull;
  // pipeline.weight_sync: delta: the set published last (the board's newest, so no
  // copy of its own), the base of the next delta.
  std::shared_ptr<const WeightSet> previous_;
  PublishStats last_publish_;
};

// The policy's weights as the weight set of `version` (the tensors are the model's).
std::shared_ptr<const WeightSet> weight_set_of(const QwenForCausalLM& model, int64_t version);

}  // namespace aspen::pipeline
