#include "aspen/config/pipeline_parallel_checks.h"

#include "aspen/config/imports.h"
#include "aspen/util/error.h"

namespace aspen::config {

void check_pipeline_parallel(const TrainConfig& config, const std::string& source) {
  const int pp = config.placement.train_pp;
  if (pp == 1) return;
  const std::string with = "placement.train.pp " + std::to_string(pp) + " with ";
  const std::string hint = " or placement.train.pp=1";
  // The critic has no stage model yet; the actor refuses routing replay on stages
  // (the routing log does not cross stages); LoRA on stages is not tested end to end.
  check_input(config.algorithm.name != AlgorithmName::kPpo,
              with + "ppo is not supported yet: the critic does not run on pipeline stages",
              source + ": algorithm.name", "use grpo (or another critic-free algorithm)" + hint);
  check_input(!config.algorithm.rollout_correction.routing_replay,
              with + "routing replay is not supported yet",
              source + ": algorithm.rollout_correction.routing_replay", "set it to false" + hint);
  check_input(!config.train.lora.enabled(), with + "LoRA adapters is not supported yet",
              source + ": train.lora.rank", "set it to 0" + hint);
  // A stage without a layer would only forward messages (pipeline_stages.h).
  check_input(!config.model.path.empty() || pp <= config.model.num_layers,
              "must be at most model.num_layers (" + std::to_string(config.model.num_layers) +
                  "): every stage holds at least one decoder layer",
              source + ": placement.train.pp");
}

}  // namespace aspen::config
