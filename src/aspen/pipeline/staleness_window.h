// The staleness control of ASP as two pure rules, shared by the iteration engine
// (iteration_engine.h, which documents the schedule) and the cluster simulator (sim/),
// so both run exactly the same admission, batch-claim and streaming decisions.
//
//   admission   trained groups (consumed minus refilled) plus the groups still waiting
//               for a batch (the batch consumer's backlog: unclaimed groups, plus
//               leased rows / n) stay below (published_version + eta + 1) * B
//               (AReaL's rule; B = prompts per iteration). eta = 0 is the synchronous
//               schedule: B groups per policy version.
//   batch claim update `index` claims whole groups of consumer "batch" with
//               required_through_version = index - eta: every live group whose version
//               is <= index - eta must be in it; it fills up to `groups_wanted` groups
//               (whole: the complete window at once; else a streaming part).
// Thread safety: pure functions. Errors: aspen::Error for a non-positive n or batch.
#pragma once

#include <cstdint>

#include "aspen/config/train_config.h"
#include "aspen/dock/dock_api.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

// eta: pipeline.max_staleness in async mode, 0 (synchronous) in sync mode.
int64_t staleness_eta(const TrainConfig& config);

// Groups the admitter may still admit now (>= 0).
int64_t admissible_groups(int64_t published_version, int64_t eta, int64_t batch_groups,
                          int64_t trained_groups, const ConsumerBacklog& batch_backlog,
                          int64_t group_size);

// The claim options of update `index`'s batch (or of its next streaming part);
// timeout_s and lease_s are the caller's.
ClaimOptions batch_claim_options(int64_t index, int64_t eta, int64_t groups_wanted,
                                 int64_t group_size, bool whole);

// Whether updates stream (pipeline.stream_updates in force): async mode, a single
// optimizer step whose loss and advantages decompose over groups — a group-local
// advantage estimator (grpo, dapo, dr_grpo, rloo), no batch-level KL controller, no
// critic, every group kept (no dynamic sampling). Sync mode trains each batch whole,
// so its updates do not depend on the order in which groups finished.
bool streams_updates(const TrainConfig& config);

}  // namespace aspen::pipeline
