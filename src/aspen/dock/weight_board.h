// WeightBoard: the weights a trainer publishes in its warehouse, for rollout instances
// to fetch (WarehouseApi::latest_weights, weight_update).
//
// It holds the newest full set and, with pipeline.weight_sync: delta, the chain of
// deltas that led to it (dock/weight_delta.h): delta k turns version k-1's set into
// version k's. An instance holding version h asks update(h) and gets the deltas after
// h, or the full set when h is not on the chain (no weights yet, a set published full
// since, or so far behind that the chain was trimmed). Why this design: an instance
// may skip versions (it loads the newest at a step boundary), so a delta must start at
// the version it holds; a chain serves every holder from one copy of the weights (the
// newest, which the board holds anyway), where per-holder deltas would need the
// trainer to keep every version some instance holds. The chain is trimmed from its
// oldest end while its deltas together are not smaller than the full set: beyond that
// the full set moves fewer bytes, so the board never sends more than a full publish.
// Thread safety: every method is safe from any thread; sets and deltas are immutable.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>

#include "aspen/dock/imports.h"
#include "aspen/dock/weight_delta.h"
#include "aspen/parallel/weight_set.h"
#include "aspen/util/mutex.h"

namespace aspen::dock {

class WeightBoard {
 public:
  // A full set (the chain no longer leads to it and is dropped).
  void publish(std::shared_ptr<const WeightSet> weights);
  // `weights` and `delta`, the delta to it from the set published last: aspen::Error
  // unless delta->from_version is that set's version and delta->to_version weights'.
  void publish(std::shared_ptr<const WeightSet> weights, std::shared_ptr<const WeightDelta> delta);
  // The newest set; null before the first publish.
  std::shared_ptr<const WeightSet> latest() const;
  // What a holder of version `held` (-1: none) fetches to reach the newest: empty when
  // it holds the newest (or nothing was published), the deltas after `held` when
  // `held` is on the chain, else the full set.
  WeightUpdate update(int64_t held) const;
  // Deltas on the chain now (its length).
  size_t deltas_held() const;

 private:
  mutable Mutex mutex_;
  std::shared_ptr<const WeightSet> latest_ GUARDED_BY(mutex_);
  std::deque<std::shared_ptr<const WeightDelta>> chain_ GUARDED_BY(mutex_);
  int64_t chain_bytes_ GUARDED_BY(mutex_) = 0;
};

}  // namespace aspen::dock
