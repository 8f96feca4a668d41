#include "aspen/pipeline/rollout_claims.h"
#include "aspen/pipeline/imports.h"

#include <utility>

namespace aspen::pipeline {

bool has_room_for_unit(const QueueState& state, int64_t chunk, int64_t max_num_seqs) {
  const int64_t queued = state.running + state.waiting;
  return queued == 0 || queued + chunk <= max_num_seqs;
}

ClaimOptions rollout_claim_options(int64_t chunk, int64_t n, int64_t max_version,
                                   double lease_s) {
  ClaimOptions options;
  options.max_rows = chunk;
  options.min_rows = 1;
  options.whole_groups = chunk == n;
  options.max_version = max_version;
  options.lease_s = lease_s;
  return options;
}

RolloutClaimRound claim_rollout_units(int instance, ClaimOptions options, double steal_wait_s,
                                      const RolloutClaimer& claimer) {
  RolloutClaimRound round;
  // One unit per claim, so each unit's lease is acked when that unit finishes.
  while (claimer.has_room()) {
    options.target = instance;
    options.timeout_s = 0.0;
    Claim claim = claimer.claim(options);
    if (claim.empty() && claimer.idle() && round.started == 0) {
      options.target = -1;
      options.timeout_s = steal_wait_s;
      claim = claimer.claim(options);
      if (!claim.empty() && claim.rows.front().info.target != instance) ++round.stolen;
    }
    if (claim.empty()) break;
    if (claimer.start(std::move(claim))) ++round.started;
  }
  return round;
}

}  // namespace aspen::pipeline
