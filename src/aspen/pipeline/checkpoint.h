// Run checkpoints: everything `aspen train --resume` needs to continue a run exactly
// (same data order, same RNG streams, same optimizer state), so that a resumed
// run's metrics equal an uninterrupted run's.
//
// Layout, RUN_DIR/checkpoints/iter_NNNNNN/ (NNNNNN = iterations completed):
//   policy/                  HF directory of the actor's fp32 master weights
//                            (config.json, model.safetensors, tokenizer.json)
//   actor_optimizer.pt       AdamW moments, step counts, schedule step (optimizer.h)
//   reference.safetensors    the frozen reference (when the run has one)
//   critic.safetensors       critic parameters (ppo)
//   critic_optimizer.pt      (ppo)
//   state.json               {"iteration": N, "schedule": {...}}: prompt order and
//                            RNG, policy version, counters, KL controller, evals
// A checkpoint is written to iter_NNNNNN.tmp and renamed into place, so a run killed
// while saving leaves the previous checkpoint intact; only keep_last are kept.
// RNG streams that are not saved are counter-based (sampling seeds derive from the
// group id, update shuffles from the iteration index), so they need no state.
// Fault injection for tests: ASPEN_FAULT_CHECKPOINT_DELAY_MS=M pauses M ms halfway
// through every checkpoint write.
// Errors: aspen::Error naming the file. Thread safety: call from the trainer thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/rl_stages.h"

namespace aspen {

// Writes the checkpoint of `iteration` and prunes older ones beyond keep_last (0: keep all).
// Returns its directory.
std::string save_checkpoint(const std::string& run_dir, int64_t iteration, const RlSetup& setup,
                            RlWorkers& workers, const nlohmann::json& schedule_state,
                            int64_t keep_last);

// The newest complete checkpoint of a run directory, if any.
std::optional<std::string> latest_checkpoint(const std::string& run_dir);

struct LoadedCheckpoint {
  std::string dir;
  int64_t iteration = 0;
  nlohmann::json schedule_state;
  SavedWorkerWeights workers;  // reference and critic weights for RlWorkers
};

// Loads the policy weights into setup.model and reads the rest. Call before
// building RlWorkers (pass &loaded.workers), then restore_optimizers().
LoadedCheckpoint load_checkpoint(const std::string& dir, RlSetup& setup);
void restore_optimizers(const LoadedCheckpoint& checkpoint, RlWorkers& workers);

}  // namespace aspen
