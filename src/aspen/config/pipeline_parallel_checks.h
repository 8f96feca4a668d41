// The checks of placement.train.pp that need more of the config than the placement
// (parallel/placement.h checks the grid itself: sizes, and PP refused with TP, EP, DP
// and colocated TP instances): what the trainer cannot yet run on pipeline stages, and
// stages the built-in model's layers cannot fill. A model.path model's layer count is
// checked when the stages are built (parallel/pipeline_stages.h), naming the key too.
// Errors: aspen::Error naming placement.train.pp and the other key, `source` first.
// Thread safety: pure.
#pragma once

#include <string>

#include "aspen/config/imports.h"
#include "aspen/config/train_config.h"

namespace aspen::config {

void check_pipeline_parallel(const TrainConfig& config, const std::string& source);

}  // namespace aspen::config
