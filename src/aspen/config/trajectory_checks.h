// The checks of multi-turn runs that need more of the config than their own section:
// what trajectories (rollout.environment or rollout.agent.command) cannot do with other
// settings, and the agent's own ranges. Errors: aspen::Error naming the key, `source`
// first. Thread safety: pure.
#pragma once

#include <string>

#include "aspen/config/imports.h"
#include "aspen/config/train_config.h"

namespace aspen::config {

void check_trajectories(const TrainConfig& config, const std::string& source);

}  // namespace aspen::config
