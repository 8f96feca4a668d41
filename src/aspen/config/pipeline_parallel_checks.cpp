#include "aspen/config/pipeline_parallel_checks.h"

#include <string>

#include "aspen/config/imports.h"
#include "aspen/util/error.h"

namespace aspen::config {

void check_trainer_pipeline(const TrainConfig& config, int64_t model_layers) {
  const Placement& p = config.placement;
  if (p.train_pp == 1) return;
  const std::string key = "placement.train.pp";
  const std::string with = key + " " + std::to_string(p.train_pp) + " with ";
  const auto refuse = [&](bool combined, const std::string& other, const std::string& why,
                          const std::string& hint) {
    check_input(!combined, with + other + " is not supported yet: " + why, key + " and " + other,
                hint + " or " + key + "=1");
  };
  // PP x EP trains with EP inside DP (each stage's experts split over its data-parallel
  // ranks); EP over a stage's TP group (train.ep = train.tp) is not tested on stages.
  refuse(p.train_ep > 1 && p.train_tp > 1, "placement.train.ep > 1 and placement.train.tp > 1",
         "tensor-parallel experts are not tested on pipeline stages", "placement.train.tp=1");
  // The critic on stages is the policy's stage (train/critic.h): its experts would be
  // split with no expert-aware gradient reduction.
  refuse(config.algorithm.name == AlgorithmName::kPpo && p.train_ep > 1, "algorithm.name ppo",
         "the critic's experts are not expert-parallel", "placement.train.ep=1");
  refuse(config.algorithm.name == AlgorithmName::kPpo && p.train_tp > 1, "algorithm.name ppo",
         "the critic is not tensor-parallel", "placement.train.tp=1");
  refuse(config.train.lora.enabled(), "train.lora.rank > 0",
         "LoRA adapters are not tested on pipeline stages", "train.lora.rank=0");
  refuse(config.algorithm.rollout_correction.routing_replay,
         "algorithm.rollout_correction.routing_replay",
         "the routing log does not cross pipeline stages", "routing_replay=false");
  check_input(p.train_pp <= model_layers,
              "must be at most the model's " + std::to_string(model_layers) +
                  " decoder layers: every stage holds at least one",
              key);
}

}  // namespace aspen::config
