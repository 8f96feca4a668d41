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
//   over-sample pipeline.over_sample = f > 0 (slime's over-sampling, APRIL's abort): the
//               admission bound grows by ceil(f B) groups, and update `index` no longer
//               waits for the window's stragglers: it trains the oldest B scored groups
//               of version >= index - eta (the claim's min_version). Once its batch is
//               whole, every group admitted at a version below index + 1 - eta that it
//               did not take is a straggler: counted from its admission (AReaL's rule:
//               a trajectory admitted under version v trains by update v + eta), it
//               could not train within the bound any more. The trainer discards its
//               rows as soon as no consumer holds them (queued for an instance, or
//               scored and waiting: DockApi::discard's unleased_only), so no producer
//               ever writes a row that is gone; one being generated or scored finishes
//               first (its work is lost). The freed room admits new prompts. The cost is the aborted work and a
//               bias against long responses (they are the stragglers); the measured
//               trade-off is in docs/simulate.md.
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
// extra_groups: over-sampling's ceil(f B) (over_sample_groups), 0 without.
int64_t admissible_groups(int64_t published_version, int64_t eta, int64_t batch_groups,
                          int64_t trained_groups, const ConsumerBacklog& batch_backlog,
                          int64_t group_size, int64_t extra_groups = 0);

// ceil(pipeline.over_sample x rollout.prompts_per_iteration); 0 when over-sampling is off.
int64_t over_sample_groups(const TrainConfig& config);

// The claim options of update `index`'s batch (or of its next streaming part);
// timeout_s and lease_s are the caller's.
// abort_stragglers (over-sampling on): min_version = index - eta instead of the required
// window.
ClaimOptions batch_claim_options(int64_t index, int64_t eta, int64_t groups_wanted,
                                 int64_t group_size, bool whole, bool abort_stragglers = false);

// The oldest version a row may hold and still train at update `next_index` or later.
int64_t oldest_trainable_version(int64_t next_index, int64_t eta);
// Over-sampling: whether a group admitted at `admitted_version` and not yet trained is a
// straggler once the batches before update `next_index` are fixed.
bool is_straggler(int64_t admitted_version, int64_t next_index, int64_t eta);

// Whether updates stream (pipeline.stream_updates in force): async mode, a single
// optimizer step whose loss and advantages decompose over groups — a group-local
// advantage estimator (grpo, dapo, dr_grpo, rloo), no batch-level KL controller, no
// critic, every group kept (no dynamic sampling). Sync mode trains each batch whole,
// so its updates do not depend on the order in which groups finished.
bool streams_updates(const TrainConfig& config);

}  // namespace aspen::pipeline
