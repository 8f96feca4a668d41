// The simulator's event loop (sim/simulator.h) as a class, shared by its two source
// files: simulator.cpp (construction, admission, the trainer, the run and its summary)
// and simulation_rollout.cpp (the instances, partial rollouts, over-sampling's aborts
// and the reward). Internal to the module: nothing outside src/aspen/sim includes it.
// Thread safety: none (one simulation per call, on the calling thread).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "aspen/dock/controller.h"
#include "aspen/pipeline/dispatch_policy.h"
#include "aspen/report/bubble_accounting.h"
#include "aspen/report/trace_writer.h"
#include "aspen/sim/cost_model.h"
#include "aspen/sim/imports.h"
#include "aspen/sim/simulated_instance.h"
#include "aspen/sim/simulator.h"
#include "aspen/util/clock.h"

namespace aspen::sim {

// No failures are simulated, so no lease may expire: every lease outlives the run.
constexpr double kLeaseSeconds = 1e9;
constexpr int64_t kDockCapacityRows = int64_t{1} << 24;

// kAdmit: the admitter's next poll (after an abort freed room), outside the caller's turn.
enum class EventKind { kInstance, kReward, kTrainer, kAdmit };

struct Event {
  double time = 0;
  int64_t order = 0;  // FIFO among equal times: the simulation is deterministic
  EventKind kind = EventKind::kInstance;
  int index = 0;
  int64_t tag = 0;
  bool operator>(const Event& other) const {
    return time != other.time ? time > other.time : order > other.order;
  }
};

struct InstanceState {
  std::unique_ptr<SimulatedInstance> engine;
  int64_t version = 0;       // weights it runs
  int64_t generation = 0;    // of its pending event; older events are stale
  bool pending = false;      // a segment or a weight load is in flight
  bool loading = false;
  bool just_loaded = false;  // the next boundary is the first on newly loaded weights
  int64_t unclaimed = 0;     // units dispatched to it and not claimed yet (a wake-up hint)
  double reward_free_at = 0;
  double busy_at_iteration_start = 0;
  int64_t stolen = 0;
};

class Simulation {
 public:
  explicit Simulation(const SimulationSpec& spec);
  nlohmann::json run();

 private:
  double now() const { return clock_.seconds(); }
  void schedule(double time, EventKind kind, int index, int64_t tag);
  TimeSource::TimePoint at(double seconds) const {
    return trace_.origin() + std::chrono::duration_cast<TimeSource::TimePoint::duration>(
                                 std::chrono::duration<double>(seconds));
  }
  // Trainer.
  void admit();
  void wait_mark();
  void trainer_try();
  void start_part(const Claim& batch);
  void trainer_done();
  void finish_iteration();
  // Instances and reward.
  bool has_room(const InstanceState& instance) const;
  void wake(int i);
  void boundary(int i);
  bool after_load(int i);  // recompute and cuts at a weight switch; true: claim nothing now

  bool peer_is_idle(int i) const;
  void abort_stragglers();  // the unheld groups the whole batches left behind
  int64_t claim_units(int i);
  void instance_event(int i, int64_t tag);
  void unit_done(int i, const SimulatedUnitDone& done);
  void reward_done(int64_t tag);  // a unit's rows scored (tag: reward_queue_)

  const SimulationSpec& spec_;
  CostModel costs_;
  ManualClock clock_;
  DockController dock_;
  Dispatcher dispatcher_;
  BubbleAccounting bubbles_;
  TraceWriter trace_;
  int trainer_track_ = 0;
  std::vector<int> instance_tracks_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  int64_t order_ = 0;
  std::vector<InstanceState> instances_;
  int64_t unclaimed_total_ = 0;

  // The workload's truth (what a real rollout would sample), by group and by row.
  std::unordered_map<int64_t, std::vector<int64_t>> group_lengths_;
  std::unordered_map<RowId, int64_t> row_sample_;  // row -> sample index in its group
  std::unordered_map<int64_t, Claim> rollout_leases_;
  std::unordered_map<int64_t, std::pair<int64_t, int64_t>> reward_queue_;  // tag -> group, rows
  std::unordered_map<int64_t, int64_t> scored_rows_;              // group -> rows scored
  // Partial rollouts: a cut row's tokens so far and the version of its oldest token.
  std::unordered_map<RowId, std::pair<int64_t, int64_t>> row_progress_;
  int64_t cut_units_ = 0, cut_tokens_ = 0, resumed_units_ = 0;
  int64_t aborted_groups_ = 0, aborted_tokens_ = 0;
  // Over-sampling: the groups not yet in a batch (the trainer's Admission keeps the
  // same).
  enum class GroupState { kQueued, kGenerating, kFinished };
  struct OpenGroup {
    int64_t version = 0;  // admitted at
    std::vector<RowId> rows;
    int target = -1;  // while queued
    GroupState state = GroupState::kQueued;
  };
  std::map<int64_t, OpenGroup> open_groups_;
  std::unordered_set<int64_t> ready_set_;  // scored, not in a batch (over-sampling only)
  int64_t whole_through_ = -1;             // the last update whose batch is whole
  int64_t next_group_ = 0;
  int64_t next_reward_tag_ = 0;

  // Trainer state.
  int64_t version_ = 0;            // updates done
  int64_t published_version_ = 0;  // weights on the board
  int64_t trained_groups_ = 0;     // consumed by finished updates
  int64_t ready_groups_ = 0;       // scored, not yet in a batch (a wake-up hint)
  int64_t scored_groups_ = 0;      // scored so far
  // A failed batch claim with P pending required rows cannot succeed before P / n more
  // groups are scored: the next claim waits for that many (a necessary condition).
  int64_t claim_after_scored_ = 0;
  // The admission bound moves only with the published version, the trained groups and
  // the discarded ones (over-sampling's aborts reset the marks): admission is
  // re-evaluated when one changed.
  int64_t admitted_at_version_ = -1, admitted_at_trained_ = -1;
  bool waiting_ = true;
  bool sorting_ = false;  // the wait's current kind: ready groups held by the window
  double wait_mark_ = 0;
  double idle_ = 0, sorting_s_ = 0;
  int64_t batch_groups_in_ = 0;  // groups of the current update claimed so far
  std::vector<Claim> batch_leases_;
  double part_start_ = 0;
  const char* part_name_ = "update";
  bool part_completes_batch_ = false;
  double trainer_busy_ = 0;
  int64_t iteration_ = 0;
  double iteration_start_ = 0;
  int64_t iteration_tokens_ = 0, iteration_rows_ = 0;
  // Totals.
  int64_t trained_tokens_ = 0, trained_rows_ = 0;
  nlohmann::json iterations_ = nlohmann::json::array();
  std::map<std::string, double> bubble_weighted_;
  std::map<std::string, int64_t> staleness_;
};

}  // namespace aspen::sim
