// IterationEngine: the RL pipeline as ONE engine for every mode and process layout,
// with the TransferDock as its only ledger. pipeline.mode async is ASP at
// eta = pipeline.max_staleness; sync is the same engine at eta = 0 with whole-batch
// updates (never streamed, so each update is the same computation however the
// groups finished).
//
// Layouts (placement.h; rollout instances run at rollout TP 1, trainers at any DP x TP):
//   one process      the trainer on the driver thread, pipeline.instances rollout
//                    instances on threads of their own, a reward thread; the dock is
//                    in-process.
//   colocated        (aspen launch) every rank trains (the DP x TP grid) AND runs a
//                    rollout instance thread (a rank of one, rollout.tp ranks per
//                    instance) and a reward thread.
//   disaggregated    (aspen launch) ranks [0, dp x tp) train; each instance is the
//                    next rollout.tp ranks (its main thread) with a reward thread.
// The engine decides only WHEN things happen; every stage is the shared dock consumer
// of rl_stages.h, and rollout instances and reward are the RolloutWorker and
// RewardWorker loops (rollout_worker.h, reward_worker.h), wherever they run.
//
// The ledger. A prompt group's n rows are allocated at ADMISSION (by trainer rank 0,
// with the prompt and example columns, RowInfo::version = the published policy
// version, a lower bound of the version that will generate it, and RowInfo::target =
// the instance the dispatcher chose). From then on the controller holds everything:
//   dispatched    claimable by consumer "rollout" of its target instance (any
//                 instance once its lease expired or its instance was declared dead);
//   generated     response columns published, tokens and version updated;
//   scored        "reward" acked (the verifier score also in its own column);
//   in a batch    leased by consumer "batch", acked after the update;
//   retired       every consumer acked it; or discarded (no instance could serve it).
// Admission keeps trained_groups + (live groups whose batch has not acked them)
// below (published_version + eta + 1) * B (B = prompts_per_iteration, AReaL's rule).
// The batch of update i is ONE claim of consumer "batch" with
// required_through_version = i - eta (dock_api.h): it must contain every live group
// whose version is (or, not yet generated, may still be) <= i - eta and fills up to B
// groups in (version, row id) order. So a row generated at version v trains at an
// update in v..v+eta, exactly, on any number of ranks; eta = 0 is the synchronous
// schedule (B groups per version, all trained by the next update). Rewards, lengths
// and versions for the metrics are read back from the batch's rows and columns.
//
// DAPO dynamic sampling (algorithm.dynamic_sampling): the batch is claimed in rounds;
// a group whose shaped rewards are all equal is discarded from the dock and, before
// the 4th round, replaced by a newly admitted group (admission counts consumed minus
// refilled groups). After the 4th round the batch trains on the informative groups it
// has; with none, the update is skipped and the version still advances.
//
// Streaming (pipeline.stream_updates, one trainer, single-step group-local updates):
// the batch is claimed in parts (complete_window = false), each trained as it comes
// (gradients accumulated), one optimizer step when the batch is whole. With several
// trainers the batch is claimed whole and each stage is claimed once by trainer 0
// with balance_ranks = dp and handed to the others as metadata (claim_codec.h).
//
// Swap (placement.swap, eta 0 only): the trainer's optimizer state and gradients
// leave memory while it waits for its batch and come back before the update
// (training_state_swap.h); the update is then batched, not streamed.
//
// Weights: every trainer rank publishes the policy as a versioned WeightSet on its own
// warehouse every sync_every updates; an instance loads the newest set of its rank's
// warehouse (a rollout-only rank: trainer 0's, fetched over the dock) at a step
// boundary. Colocated tensor-parallel instances instead take the shard their own rank
// resharded from the training layout (allgather-swap, resharder.h): an instance is
// the ranks of one inference replica, and its leader tells the peers which version.
//
// Where rows live: a training rank keeps what it writes in its own warehouse; a
// rollout-only rank keeps none and writes its finished rows into trainer 0's
// (make_distributed_dock's write_to_rank0), so its death takes only unfinished
// generation with it. The trainers then read their shares from there.
//
// Instance failure (pipeline.on_instance_failure): trainer 0 reads every instance's
// status from the controller's board; one silent for pipeline.instance_timeout_s (or
// exited early) has failed. "regenerate": it gets no more groups, its undispatched
// groups are re-targeted to any instance and its leased ones come back when their
// leases (instance_timeout_s, renewed by live instances) run out, to be generated
// again elsewhere: nothing is lost or trained twice. "stop": the run ends with an
// aspen::Error naming the instance and its rank. A trainer's failure ends the run (the
// launcher stops every rank).
//
// Bubbles per iteration (bubble_accounting.h): trainer idle split into sorting (ready
// groups wait while the window keeps the batch open) and starvation; rollout idle and
// skewness from the instances' busy seconds on the board; staleness of trained rows.
// Thread safety: see schedule.h.
#pragma once

#include <optional>

#include "aspen/parallel/process_group.h"
#include "aspen/pipeline/schedule.h"

namespace aspen {

// `world`: the ranks of an aspen launch job (nullopt: one process). Collective over
// `world` (every rank constructs it).
std::unique_ptr<Schedule> make_iteration_engine(const ScheduleContext& context,
                                                std::optional<ProcessGroupHandle> world);

}  // namespace aspen
