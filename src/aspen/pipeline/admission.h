// Admission: trainer 0's front door of the pipeline. It draws prompt groups from the
// prompt source, allocates each group's n rows in the dock (prompt, example and
// sample-index columns; RowInfo::version = the published policy version, a lower
// bound of the version that will generate it; RowInfo::target = the instance the
// dispatcher chose), and keeps the staleness window: trained groups + groups not yet
// given to a batch stay below (published_version + eta + 1) * B (staleness_window.h,
// AReaL's rule).
//
// It also holds trainer 0's view of the rollout instances, read from the controller's
// status board: their queues for the dispatcher, their completions and throughput,
// and failure. One silent for pipeline.instance_timeout_s (or exited early) has
// failed: with on_instance_failure "regenerate" it gets no more groups, its
// undispatched groups are re-targeted to any instance (its leased ones come back when
// their leases run out); with "stop" the run ends with an aspen::Error naming the
// instance and its rank.
//
// Every call is trainer 0's, on its thread; nothing here starts a thread, so each
// part is testable with an in-process dock and no rollout running.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "aspen/dock/transfer_dock.h"
#include "aspen/pipeline/dispatch_policy.h"
#include "aspen/pipeline/engine_layout.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/instance_status.h"
#include "aspen/pipeline/prompt_source.h"
#include "aspen/pipeline/rl_setup.h"
#include "aspen/report/trace_writer.h"

namespace aspen::pipeline {

class Admission {
 public:
  // `trace` may be null; `track` is the trainer's timeline.
  Admission(const TrainConfig& config, const RlSetup& setup, TransferDock& dock,
            const EngineLayout& layout, TraceWriter* trace, int track);

  // Reads every instance's state from the board (completions and throughput go to
  // the dispatcher) and declares silent or exited instances failed (see above).
  void refresh_instances();
  // Refreshes, then admits groups up to the staleness window's bound.
  void admit();
  // Allocates one group's rows at `version_bound`, each dispatch chunk to the instance
  // the dispatcher picks.
  void admit_group(const PromptGroup& group, int64_t version_bound);

  // The weights instances now load: the window moves with them.
  void set_published_version(int64_t version) { published_version_ = version; }
  int64_t published_version() const { return published_version_; }
  // Groups that left the backlog through a batch. Trained ones, and ones dynamic
  // sampling dropped in its last round, are consumed; dropped ones before the last
  // round are consumed and refilled (a new group takes their slot). Closes them in the
  // prompt source either way.
  void consume(const std::vector<int64_t>& groups, bool refill);
  // Over-sampling (pipeline.over_sample; staleness_window.h): update `index`'s batch is
  // whole and holds `groups`. Every other group admitted below index + 1 - eta is a
  // straggler: aborted (its rows discarded, its prompt closed, its slot refilled) as
  // soon as no consumer holds its rows; until then its holder (an instance generating
  // it, a reward scoring it) finishes, and admit() tries again at every poll. Aborted
  // groups and their rows are counted (abort_metrics).
  void batch_whole(int64_t index, const std::vector<int64_t>& groups);
  // aborted_groups, aborted_rows: cumulative.
  nlohmann::json abort_metrics() const;

  // Rollout bubbles of the iteration that took `seconds` (bubble_accounting.h: idle
  // and skewness from the instances' busy seconds) and their work ("work": steps,
  // scheduled tokens, busy seconds), then starts the next iteration's counts.
  nlohmann::json rollout_bubbles(double seconds);
  // instance_status_age_max_s (then reset), failed_instances, stolen_groups,
  // partial_cut_samples, partial_cut_tokens, partial_resumed_samples.
  nlohmann::json instance_metrics();

  // What a checkpoint keeps: the prompt source, the open groups (regenerated on resume,
  // same ids, so the same sampling seeds) and the consumed/refilled counts.
  nlohmann::json state() const;
  // Restores state() and admits its open groups again at `version`.
  void restore(const nlohmann::json& state, int64_t version);

 private:
  // What trainer 0 knows of one rollout instance, from the status board.
  struct InstanceView {
    InstanceStatus status;
    bool seen = false;
    bool failed = false;
    double age_s = 0.0;
    double busy_at_iteration_start = 0.0;
    int64_t steps_at_iteration_start = 0;
    int64_t tokens_at_iteration_start = 0;
    double tool_wait_at_iteration_start = 0.0;
  };
  int choose_instance(const GroupShape& shape);

  const TrainConfig& config_;
  const RlSetup& setup_;
  TransferDock& dock_;
  const EngineLayout& layout_;
  TraceWriter* trace_;
  int track_;
  const int64_t eta_;
  const int64_t batch_groups_;
  PromptSource prompts_;
  Dispatcher dispatcher_;
  std::vector<InstanceView> instances_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  int64_t published_version_ = 0;
  // Groups that left the backlog through a batch (trained, or dropped by dynamic
  // sampling) and those of them replaced: admission keeps consumed - refilled +
  // waiting below its bound.
  int64_t consumed_groups_ = 0;
  int64_t refilled_groups_ = 0;
  double status_age_max_s_ = 0.0;  // oldest live instance state read, this iteration
  // Over-sampling: the groups not yet in a batch, with their admission version and
  // the rows still live; the last update whose batch is whole.
  struct OpenGroup {
    int64_t version = 0;
    std::vector<RowId> rows;
  };
  void abort_stragglers();
  const int64_t extra_groups_;  // over_sample_groups(config)
  std::map<int64_t, OpenGroup> open_;
  int64_t whole_through_ = -1;
  int64_t aborted_groups_ = 0;
  int64_t aborted_rows_ = 0;
};

}  // namespace aspen::pipeline
