// The supervised phase of a run: `train.sft_steps` steps of SftTrainer on the
// run's training examples (prompt -> reference answer + EOS), with a cosine
// schedule peaking at `train.sft_lr`. It is the built-in demo's warm-up before
// RL and the whole job of `aspen sft`. Reports go to `metrics` (one JSON line per
// 50 steps) and, if logging.console, to stdout.
// Thread safety: trains setup.model in place from the calling thread.
#pragma once

#include <ostream>

#include "aspen/config/train_config.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/train/trainer_options.h"

namespace aspen::pipeline {

void run_sft_phase(const TrainConfig& config, RlSetup& setup, std::ostream& metrics);

// Trainer options (optimizer, schedule over `total_steps`, precision, recompute,
// micro-batch budget) from the train section, with peak learning rate `lr`.
TrainerOptions trainer_options(const TrainSection& train, double lr, int64_t total_steps);

}  // namespace aspen::pipeline
