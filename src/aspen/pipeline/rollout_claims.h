// How a rollout instance claims the units dispatched to it: one rule, run by the real
// instances (rollout_worker.h) and by the cluster simulator's (sim/simulator.cpp), so
// the simulated cluster claims, waits and steals exactly as the real one does.
//
//   unit       one claim of consumer "rollout": pipeline.dispatch_chunk samples (whole
//              groups when the chunk is rollout.n), admitted at a version no newer
//              than the instance's loaded weights.
//   room       an instance claims a unit only while its engine could start it now:
//              running + waiting + chunk <= max_num_seqs. The rest stay in the dock.
//              An empty engine takes a unit whatever its size (the scheduler forks a
//              group past max_num_seqs), so a chunk larger than max_num_seqs cannot
//              stall the run.
//   own first  each claim asks for a unit dispatched to this instance (target).
//   stealing   when none of its own is claimable, its engine has nothing unfinished
//              and it has started nothing in this round, it claims a unit dispatched
//              anywhere (target -1), waiting up to steal_wait_s for one: the
//              dispatcher's choice is a preference, so a misestimated queue never
//              idles an instance while another one's units wait. A stolen unit is one
//              whose target was another instance.
// Thread safety: pure functions; claim_rollout_units runs on the caller's thread and
// calls back into it only.
#pragma once

#include <cstdint>
#include <functional>

#include "aspen/dock/dock_api.h"
#include "aspen/pipeline/imports.h"
#include "aspen/rollout/engine.h"

namespace aspen::pipeline {

// Whether an engine whose queue is `state` could start one more unit of `chunk`
// samples now.
bool has_room_for_unit(const QueueState& state, int64_t chunk, int64_t max_num_seqs);

// The options of an instance's unit claims (target and timeout_s are set per claim by
// claim_rollout_units): at most one unit of `chunk` rows, whole groups when the chunk
// is the group size `n`, versions <= `max_version` (the loaded weights').
ClaimOptions rollout_claim_options(int64_t chunk, int64_t n, int64_t max_version,
                                   double lease_s);

// What claim_rollout_units asks of the instance it claims for.
struct RolloutClaimer {
  std::function<bool()> has_room;  // room for one more unit (false also ends the round)
  std::function<bool()> idle;      // its engine has nothing unfinished
  std::function<Claim(const ClaimOptions&)> claim;  // one dock claim of "rollout"
  // Hands a claimed unit to the engine; false when the engine refused it (its rows
  // were discarded): it does not count as started.
  std::function<bool(Claim)> start;
};

struct RolloutClaimRound {
  int64_t started = 0;  // units handed to the engine
  int64_t stolen = 0;   // claimed units whose target was another instance
};

// One round of claims of instance `instance` by the rule above, with `options` from
// rollout_claim_options.
RolloutClaimRound claim_rollout_units(int instance, ClaimOptions options, double steal_wait_s,
                                      const RolloutClaimer& claimer);

}  // namespace aspen::pipeline
