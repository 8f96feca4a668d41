// AsyncSchedule: the adaptive scheduling pipeline (ASP) — generation and training
// decoupled over several rollout instances.
//
// Roles and threads:
//   rollout instances  InstancePool: one thread per instance generates continuously
//                      (continuous batching), own intra-op threads and cores.
//   collector          one thread: gathers finished samples into their groups; a
//                      complete group goes into the dock and is scored at once
//                      (the reward stage), then becomes ready for the trainer.
//   trainer            the driver's thread: each iteration forms a batch of
//                      prompts_per_iteration ready groups and runs reference / old /
//                      values / advantage / update on exactly those rows (claims
//                      filtered by group), then publishes weights every sync_every updates.
//                      Streaming (pipeline.stream_updates, for single-step updates with
//                      group-local advantages and no critic): the trainer takes groups
//                      as soon as the batch may take them and runs their stages and
//                      forward/backward at once, accumulating gradients
//                      (ActorTrainer::accumulate); the one step follows when the batch
//                      is whole. It waits only when nothing takeable is ready: the
//                      sorting bubble is then the time ready groups wait while the
//                      staleness bound reserves the batch's last slots for groups still
//                      generating, and the rest of the wait is starvation.
//
// Staleness bound eta = pipeline.max_staleness. Versions: the trainer's update i
// turns weights i into i+1; a row's version is the policy version of its first token.
//   admission  (AReaL's rule) a new group is admitted only while
//              admitted <= (rollout_version + eta + 1) * B, B = prompts_per_iteration,
//              so at most (v + eta + 1) * B groups can carry a version <= v;
//   batching   update i MUST include every admitted group whose version is (or, for
//              a group not yet finished, may still be: its admission-time rollout
//              version is a lower bound) <= i - eta, waiting for them; the batch is
//              filled up to B groups with the lowest-version ready groups (then the
//              earliest finished). So a row generated at version v trains at an
//              update in v..v+eta, and eta = 0 is the synchronous schedule: B groups per
//              version, all trained by the next update. sync_every <= eta + 1 is
//              required (checked by the config), else old weights would outlive eta.
// Off-policy rows use the configured correction (algorithm.off_policy; async default
// "decoupled": behaviour = rollout log-probs, proximal = recomputed by the trainer;
// "none": the rollout log-probs are the PPO anchor, nothing is recomputed).
// Core budgets: rollout instances and the trainer are pinned as configured, and the
// BLAS pool is set to pipeline.threads (blas_threads.h) so GEMMs stay on their role's cores.
// Dispatch (dispatch_policy.h): each admitted group goes whole to the instance the
// policy picks, from the instances' published queue states.
// Bubbles per iteration (bubble_accounting.h): trainer idle split into sorting
// (ready rows exist, batch incomplete) and starvation; rollout idle and skewness from
// the instances' busy seconds; staleness histogram of trained rows.
// Groups whose samples were aborted by an instance (unservable) are dropped and
// their admission slot returned. Thread safety: see schedule.h.
#pragma once

#include "aspen/pipeline/schedule.h"
