// Run checkpoints: everything `aspen train --resume` needs to continue a run exactly
// (same data order, same RNG streams, same optimizer state), so that a resumed
// run's metrics equal an uninterrupted run's.
//
// Layout, RUN_DIR/checkpoints/iter_NNNNNN/ (NNNNNN = iterations completed):
//   policy/                  HF directory of the actor's fp32 master weights
//                            (config.json, model.safetensors, tokenizer.json)
//   actor_optimizer-RRRRR-of-PPPPP.safetensors
//                            AdamW moments and steps by parameter name, and the
//                            schedule step (Optimizer::checkpoint_state): P = 1, or
//                            train.ep under expert parallelism, where EP rank R's file
//                            holds its own experts' state (and rank 0's also the rest),
//                            or train.pp under pipeline parallelism, where stage R's file
//                            holds its stage's parameters' state (a tied embedding's in
//                            the first stage's only), or train.pp x train.ep under both,
//                            where share s * ep + e is EP rank e of stage s (the stage's
//                            parameters from EP rank 0, its experts from the others);
//                            the step counter in every file
//   reference.safetensors    the frozen reference (when the run has one), every expert
//                            and every stage's layers (gathered)
//   actor_optimizer/, reference/   instead, under tensor parallelism (train.tp > 1):
//                            the AdamW state and the reference as each TP rank of the
//                            first data-parallel replica holds them, its own shards
//                            written by itself (pipeline/checkpoint_shards.h); with
//                            pipeline stages too, a directory per stage in each
//   critic.safetensors       critic parameters (ppo)
//   critic_optimizer.safetensors  (ppo)
//   state.json               {"iteration": N, "schedule": {...}}: prompt order and
//                            RNG, policy version, counters, KL controller, evals
//   manifest.json            written last: size and CRC32C of every file above
//                            (pipeline/checkpoint_manifest.h)
// A checkpoint is written to iter_NNNNNN.tmp and renamed into place, so a run killed
// while saving leaves the previous checkpoint intact; only keep_last are kept.
// RNG streams that are not saved are counter-based (sampling seeds derive from the
// group id, update shuffles from the iteration index), so they need no state.
// Expert-, tensor- and pipeline-parallel runs: the state is by name (and shard
// metadata), not by rank, so a checkpoint resumes at any train.ep, train.tp and
// train.pp the model allows (and in one process): every rank reads the optimizer files and takes the parameters it
// holds, cut or assembled into its own shards; the policy is whole at every layout. Checkpoints of Aspen before the named format (actor_optimizer.pt,
// critic_optimizer.pt, torch archives) still resume, with the same parameters.
// Fault injection for tests: ASPEN_FAULT_CHECKPOINT_DELAY_MS=M pauses M ms halfway
// through every checkpoint write.
// Loading checks state.json in full (checkpoint_state.h), its iteration against the
// directory's name, and every file against manifest.json before a tensor is read; a
// checkpoint without a manifest (Aspen before checksums) loads with a warning.
// Errors: aspen::Error naming the file. Thread safety: call from the trainer thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/pipeline/rl_stages.h"
#include "aspen/parallel/expert_parallel.h"

namespace aspen::pipeline {

// Writes the checkpoint of `iteration` and prunes older ones beyond keep_last (0: keep all).
// Returns its directory. With an enabled `experts` context (the actor's, train.ep > 1)
// it is collective over that EP group, the first one (ranks 0..ep-1): each rank writes
// its experts' optimizer state, EP rank 0 (the run's rank 0) everything else; the
// others' schedule_state is not read. Under tensor parallelism (the actor model's TP
// context, train.tp > 1) it is collective over the actor's first TP group instead
// (ranks 0..tp-1, the first data-parallel replica; with train.ep = train.tp also its
// EP group): each writes its shards of the optimizer state and the reference. Under
// pipeline parallelism (the actor model's PP context, train.pp > 1) it is collective
// over the first replica's pipeline group: each stage writes its share of the
// optimizer state, and the reference is gathered to stage 0 (rank 0). Both (PP x TP):
// every stage's TP group writes its stage's directory of shards; the barriers run over
// the TP and the pipeline groups, stage 0's TP rank 0 leading. PP x EP (`experts` then
// the stage's EP group): collective over the first EP group's pipelines; each stage's
// EP rank writes its share, the reference is gathered over the EP groups and then the
// stages; the barriers run over the EP and the pipeline groups, stage 0's EP rank 0
// leading. setup.model must hold the policy trained so far (policy/ is written from it):
// under TP, EP or PP the caller has the trainers gather it first
// (IterationEngine::ensure_full_policy, rl_run.cpp).
std::string save_checkpoint(const std::string& run_dir, int64_t iteration, const RlSetup& setup,
                            RlWorkers& workers, const nlohmann::json& schedule_state,
                            int64_t keep_last, const ExpertParallel& experts = {});

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

}  // namespace aspen::pipeline
