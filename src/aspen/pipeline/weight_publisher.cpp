#include "aspen/pipeline/weight_publisher.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "aspen/dock/weight_delta.h"
#include "aspen/model/expert_parallel_state.h"
#include "aspen/model/tp_layout.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_stages.h"
#include "aspen/pipeline/stage_gather.h"
#include "aspen/util/seconds_since.h"

namespace aspen::pipeline {

WeightPublisher::WeightPublisher(const TrainConfig& config, const ModelConfig& model_config,
                                 const EngineLayout& layout, int world_size,
                                 std::optional<ProcessGroupHandle> trainers)
    : weight_sync_(config.pipeline.weight_sync) {
  if (layout.trains() && layout.train_tp > 1) {
    ReshardPlan plan;
    // The trainers as TP groups of consecutive ranks: one per replica and stage (a
    // stage's TP group gathers the shards of its own layers only).
    plan.train_dp = config.placement.train_dp * config.placement.train_pp;
    plan.train_tp = config.placement.train_tp;
    plan.infer_tp = 1;
    plan.dtype = torch::kFloat;  // the rollout engines compute in fp32
    // train.ep = train.tp: the experts are gathered whole over the EP (= TP) group
    // first, so the resharder sees them replicated.
    const bool experts_gathered = config.placement.train_ep > 1;
    full_resharder_ = std::make_unique<Resharder>(
        trainers, plan, [model_config, experts_gathered](const std::string& name) {
          return experts_gathered && is_expert_parameter(name) ? ShardSpec{}
                                                               : qwen_shard_spec(name, model_config);
        });
  }
  gathers_experts_ = layout.trains() && config.placement.train_ep > 1;
  gathers_stages_ = layout.trains() && layout.train_pp > 1;
  if (world_size > 0 && instances_take_resharded_shards(config, world_size)) {
    instance_resharder_ = std::make_unique<Resharder>(
        trainers, config.placement.reshard_plan(torch::kFloat),
        [model_config](const std::string& name) { return qwen_shard_spec(name, model_config); });
    own_shards_ = std::make_shared<WeightHistory>();
  }
}

bool WeightPublisher::ensure_full_policy(QwenForCausalLM actor, QwenForCausalLM full,
                                         int64_t version) {
  if (!full_policy_stale(version)) return false;
  gather_full_policy(std::move(actor), std::move(full), version);
  full_version_ = version;
  return true;
}

void WeightPublisher::gather_full_policy(QwenForCausalLM actor, QwenForCausalLM full,
                                         int64_t version) {
  torch::NoGradGuard no_grad;
  if (gathers_stages_ && !full_resharder_) {
    // train.pp > 1: the stages' layers; under PP x EP each stage's experts are first
    // gathered over its EP group (stage_gather.h).
    full->load_state(gather_pipeline_stages(actor), "gathered pipeline stages");
    return;
  }
  // train.ep > 1: each rank trained its experts; all of them, with the rest, make the
  // full policy again (collective over the EP group).
  const std::vector<std::pair<std::string, torch::Tensor>> trained =
      gathers_experts_ ? gather_expert_parallel_state(actor) : actor->hf_state();
  if (full_resharder_) {
    // train.tp > 1: the TP shards gathered too (collective over the trainers).
    const std::shared_ptr<const WeightSet> gathered = full_resharder_->reshard(trained, version);
    if (gathers_stages_) {
      // PP x TP: each stage's layers whole after its TP gather, then the stages'.
      full->load_state(gather_stage_tensors(actor->pp, gathered->tensors),
                       "gathered tensor-parallel pipeline stages");
      return;
    }
    full->load_state(
        std::map<std::string, torch::Tensor>(gathered->tensors.begin(), gathered->tensors.end()),
        "gathered policy");
    return;
  }
  if (!gathers_experts_) return;  // train.tp 1: the actor trains the full policy itself
  full->load_state(std::map<std::string, torch::Tensor>(trained.begin(), trained.end()),
                   "gathered experts");
}

void WeightPublisher::publish(QwenForCausalLM actor, const QwenForCausalLM& full,
                              int64_t version, TransferDock& dock) {
  if (instance_resharder_) {
    // Collective over the trainers (every rank, colocated): each gets its own shard.
    // On a pipeline stage hf_state() is the stage's tensors; the resharder's stage
    // exchange adds the other stages' (resharder.h).
    own_shards_->publish(instance_resharder_->reshard(actor->hf_state(), version));
    reshard_bytes_moved_ = instance_resharder_->last_stats().bytes_moved;
    return;
  }
  // Every training rank holds the full policy (when the actor holds less: gathered
  // now unless a reader already did at this version) and serves it from its own
  // warehouse.
  ensure_full_policy(actor, full, version);
  std::shared_ptr<const WeightSet> set = weight_set_of(full, version);
  last_publish_ = PublishStats{set->bytes(), set->bytes(), false, 0.0};
  if (weight_sync_ != WeightSync::kDelta || full->has_lora()) {
    dock.publish_weights(std::move(set));
    return;
  }
  std::optional<WeightDelta> delta;
  if (previous_ != nullptr) {
    const auto start = std::chrono::steady_clock::now();
    delta = encode_weight_delta(*previous_, *set);
    last_publish_.encode_s = seconds_since(start);
  }
  previous_ = set;
  if (delta.has_value() && delta->bytes() < set->bytes()) {
    last_publish_.bytes = delta->bytes();
    last_publish_.delta = true;
    dock.publish_weights(std::move(set), std::make_shared<const WeightDelta>(std::move(*delta)));
  } else {
    dock.publish_weights(std::move(set));  // the first set, or one the delta would not shrink
  }
}

std::optional<int64_t> WeightPublisher::reshard_bytes_moved() const {
  if (!instance_resharder_) return std::nullopt;
  return reshard_bytes_moved_;
}

std::shared_ptr<const WeightSet> weight_set_of(const QwenForCausalLM& model, int64_t version) {
  auto set = std::make_shared<WeightSet>();
  set->version = version;
  for (auto& [name, tensor] : policy_weights(model)) set->tensors.emplace_back(name, tensor);
  return set;
}

}  // namespace aspen::pipeline
