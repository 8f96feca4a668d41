// WeightReceiver: a rollout instance's side of the dock's weight board: what it fetches
// at a step boundary to reach the newest weights a trainer published.
//
// pipeline.weight_sync: full fetches the newest set when it is newer than the engine's
// version (WarehouseApi::latest_weights), as before deltas existed. delta asks the
// board for the deltas after the version this receiver last took
// (WarehouseApi::weight_update; the full set when that version is not on the board's
// chain) and applies them to the set it keeps (dock/weight_delta.h). Why it keeps that
// set rather than reading the engine's weights: the engine's copy may be cast (the
// engine computes in fp32), sharded (a tensor-parallel instance) or on a device, and a
// delta is exact only against the very bytes it was made from. The price is one set
// of host memory per instance; in one process a set taken full is the board's own
// (shared, no copy).
// Thread safety: none; the instance's thread only.
#pragma once

#include <cstdint>
#include <memory>

#include "aspen/config/train_config.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/parallel/weight_set.h"
#include "aspen/pipeline/imports.h"

namespace aspen::pipeline {

class WeightReceiver {
 public:
  explicit WeightReceiver(WeightSync sync) : sync_(sync) {}

  // The newest set at warehouse `where` when it is newer than `engine_version`, else
  // null. aspen::Error from the dock, or when a delta does not fit the kept set.
  std::shared_ptr<const WeightSet> fetch(TransferDock& dock, WarehouseId where,
                                         int64_t engine_version);

  // The last fetch that brought a set: the bytes it moved (the deltas' or the set's),
  // whether they were deltas (how many), and its seconds fetching and applying them.
  struct Receipt {
    int64_t bytes = 0;
    int64_t deltas = 0;
    double fetch_s = 0;
    double apply_s = 0;
  };
  const Receipt& last() const { return last_; }

 private:
  WeightSync sync_;
  std::shared_ptr<const WeightSet> held_;  // delta: the set last taken, exactly
  Receipt last_;
};

}  // namespace aspen::pipeline
