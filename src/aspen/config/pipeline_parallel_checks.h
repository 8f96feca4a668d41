// What `aspen train` runs on pipeline stages (placement.train.pp > 1) so far, checked
// when a run starts, before any work. Not at config parsing: the simulator (`aspen
// simulate`) models every DP x PP x TP grid, so the config itself takes them
// (parallel/placement.h checks the grid's sizes).
// Refused, naming placement.train.pp and the other key: PP with train.ep > 1 under
// train.tp > 1 (experts split over a stage's TP group are not tested on stages; DP x PP,
// PP x TP and PP x EP inside DP train), with ppo under EP (the critic's experts are not
// expert-parallel), with ppo under TP (the
// critic is not tensor-parallel), LoRA (not tested on stages), routing
// replay (the routing log does not cross stages), and more stages than the model's
// `model_layers` decoder layers (a stage without a layer would only forward messages).
// Errors: aspen::Error. Thread safety: pure.
#pragma once

#include <cstdint>

#include "aspen/config/imports.h"
#include "aspen/config/train_config.h"

namespace aspen::config {

void check_trainer_pipeline(const TrainConfig& config, int64_t model_layers);

}  // namespace aspen::config
