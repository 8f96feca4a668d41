// BatchSelector: trainer 0's choice of the rows an update trains on. The batch of
// update i is ONE claim of consumer "batch" with required_through_version = i - eta
// (staleness_window.h, dock_api.h): it must contain every live group whose version is
// (or, not yet generated, may still be) <= i - eta and fills up to B groups in
// (version, row id) order. So a row generated at version v trains at an update in
// v..v+eta, exactly, on any number of ranks; eta = 0 is the synchronous schedule.
// The claim's one read brings every column the trainer's stages need
// (trainer_stages.h) and the rewards the metrics report.
//
// DAPO dynamic sampling (algorithm.dynamic_sampling): the batch is claimed in rounds;
// a group whose shaped rewards are all equal is discarded from the dock and, before
// the last (4th) round, replaced by a newly admitted group (Admission::consume). After
// the last round the batch trains on the informative groups it has, maybe none.
//
// Streaming (next_part): the batch is claimed in parts (complete_window = false), each
// trained as it comes; the part that leaves nothing pending completes the batch.
//
// Waiting: between claim attempts (every 20 ms) `between_polls` runs (the engine checks
// its workers and admits). Trainer idle time is split into sorting (ready groups wait
// while the window keeps the batch open for groups still generating) and starvation.
// Thread safety: trainer 0's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "aspen/pipeline/admission.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/trainer_stages.h"

namespace aspen::pipeline {

struct BatchWait {
  double idle_s = 0.0;     // waiting for a claim to succeed
  double sorting_s = 0.0;  // ... while ready groups were there (the window held them)
};

// Rows drawn for a batch or a streamed part of it.
struct ChosenRows {
  TrainerRows trained;              // rows kept for training, with their shaped scores
  std::vector<ColumnData> columns;  // their columns, parallel to trained.rows.rows
  std::vector<Claim> leases;        // the claims holding them: ack after the update
  RewardStats rewards;              // every row drawn, dropped ones included
  int64_t sampling_rounds = 0;
  bool completes_batch = true;  // streaming: false while groups are still pending

  // The columns of `share`'s rows (a share of trained.rows), in its order.
  std::vector<ColumnData> columns_of(const Claim& share) const;
};

class BatchSelector {
 public:
  BatchSelector(const TrainConfig& config, TransferDock& dock, Admission& admission,
                TraceWriter* trace, int track, std::function<void()> between_polls);

  // Update `index`'s whole batch; with shares > 1 its rows are split by tokens into
  // that many data-parallel shares (trained.rows.ranks).
  ChosenRows choose_batch(int64_t index, int shares, BatchWait& wait);
  // Streaming: the next part of update `index`'s batch, `groups_so_far` groups having
  // been trained; empty when the batch is already whole.
  ChosenRows next_part(int64_t index, int64_t groups_so_far, BatchWait& wait);

 private:
  // Claims update `index`'s batch (whole or, streaming, the next part).
  Claim claim_batch(int64_t index, int64_t groups_wanted, bool whole, BatchWait& wait);
  // Reads `claim`'s columns once and appends its rewards to chosen.rewards; its rows
  // go to chosen.trained and chosen.columns, or, with `drop_uninformative`, those of
  // groups whose shaped rewards are all equal go to `dropped` instead.
  void read(const Claim& claim, bool drop_uninformative, ChosenRows& chosen,
            std::vector<RowId>& dropped, std::set<int64_t>& dropped_groups);

  const TrainConfig& config_;
  TransferDock& dock_;
  Admission& admission_;
  TraceWriter* trace_;
  int track_;
  std::function<void()> between_polls_;
  const int64_t eta_;
  const int64_t batch_groups_;
};

}  // namespace aspen::pipeline
