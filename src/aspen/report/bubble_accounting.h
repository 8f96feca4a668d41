// BubbleAccounting: the per-iteration bubble metrics of DESIGN's ASP pipeline.
// Rollout threads and the trainer report as things happen; to_json() turns the
// totals into fractions (in [0, 1] when the reports are consistent) and reset()
// starts the next iteration.
//
//   padding          pad slots / slots over every reported batch, as if each batch
//                    were padded to its longest row (slots = max * count,
//                    pad = slots - sum); padding_rollout / padding_train split it
//                    by who reported the batch.
//   skewness         idle worker-time / worker-time over phases in which several
//                    workers (instances, DP ranks) work in parallel and the phase
//                    lasts as long as the slowest: idle = sum(max - busy_i),
//                    worker-time = max * workers.
//   sorting          seconds the trainer waits while ready rows exist but its batch is
//                    incomplete or being reordered, / wall seconds.
//   trainer_idle,    idle seconds reported for the role / (wall seconds * workers of
//   rollout_idle     the role), so summed instance-seconds give a per-worker fraction.
//   staleness_histogram  {"<versions behind>": rows, ...} for rows trained.
// Seconds are wall-clock seconds (double). Fractions with a zero denominator are 0.
//
// Thread safety: every method may be called from any thread (one mutex).
// Errors: negative lengths, seconds, versions or rows, and workers < 1, throw aspen::Error.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "aspen/report/imports.h"
#include "aspen/util/mutex.h"

namespace aspen::report {

enum class BubbleRole { kRollout, kTrainer };

// Slots and pad slots of one batch padded to its longest row.
struct PaddedSlots {
  int64_t slots = 0;  // max(lengths) * lengths.size()
  int64_t pad = 0;    // slots - sum(lengths)
};
PaddedSlots padded_slots(const std::vector<int64_t>& lengths);
// Pad fraction over several batches, each padded to its own max; 0 when there are no slots.
double padding_fraction(const std::vector<std::vector<int64_t>>& batches);

class BubbleAccounting {
 public:
  // Workers per role, the denominators of trainer_idle / rollout_idle.
  explicit BubbleAccounting(int rollout_workers = 1, int trainer_workers = 1);

  // One batch of row lengths (tokens): a rollout step's sequences or a training
  // micro-batch. Empty batches are ignored.
  void add_padded_batch(BubbleRole role, const std::vector<int64_t>& lengths);
  // One phase of parallel work: busy seconds of each worker. A phase whose longest
  // busy time is 0 adds nothing.
  void add_phase(const std::vector<double>& busy_seconds_per_worker);
  void add_sorting_wait(double seconds);
  void add_idle(BubbleRole role, double seconds);
  void add_staleness(int64_t versions_behind, int64_t rows);

  // {"padding", "padding_rollout", "padding_train", "skewness", "sorting",
  //  "trainer_idle", "rollout_idle", "staleness_histogram"} for an iteration that
  // lasted `wall_seconds` (>= 0).
  nlohmann::json to_json(double wall_seconds) const;
  // Forgets everything reported (worker counts stay).
  void reset();

 private:
  struct Padding {
    int64_t slots = 0;
    int64_t pad = 0;
  };

  const int rollout_workers_;
  const int trainer_workers_;
  mutable Mutex mutex_;
  Padding rollout_padding_ GUARDED_BY(mutex_);
  Padding train_padding_ GUARDED_BY(mutex_);
  double skew_idle_ GUARDED_BY(mutex_) = 0;      // worker-seconds
  double skew_capacity_ GUARDED_BY(mutex_) = 0;  // worker-seconds
  double sorting_seconds_ GUARDED_BY(mutex_) = 0;
  double rollout_idle_seconds_ GUARDED_BY(mutex_) = 0;
  double trainer_idle_seconds_ GUARDED_BY(mutex_) = 0;
  std::map<int64_t, int64_t> staleness_ GUARDED_BY(mutex_);
};

}  // namespace aspen::report
