// SimulatedInstance: one rollout instance's continuous batching, as a faithful model of
// the engine's vLLM-style scheduler (rollout/scheduler.h) advanced in segments instead
// of steps, with each segment's time from the CostModel.
//
// The model, per step, in the scheduler's order (rollout/scheduler.h, engine.cpp):
//   - a unit (a group, or a chunk of one) waits as ONE sequence that computes its
//     prompt; when the prompt is done it samples every sample's first token and forks
//     the others right behind it in the running list (past max_num_seqs, as the engine
//     forks), sharing the prompt's KV;
//   - running sequences, in order, take min(pending tokens, budget) of the step's
//     max_num_batched_tokens: a decode 1, a prefill a chunk (chunked prefill);
//   - a running sequence whose next token does not fit the KV cache preempts the newest
//     running one (to the front of the waiting queue; it recomputes its own tokens, and
//     the prompt too when no sibling holds it), itself if it is the newest;
//   - waiting sequences join only in a step without preemption, while fewer than
//     max_num_seqs run and their tokens fit;
//   - finished sequences leave after the step.
// Between two such events every step decodes the same B sequences, so a segment of k
// steps is summed in closed form (CostModel::decode_steps_s): the simulation costs one
// event per admission, finish, preemption or arrival, not one per token.
// KV usage is counted in tokens (block rounding ignored: under one block per sequence),
// reserved when a sequence joins (its prompt if the unit holds none yet, its own tokens
// to recompute) and grown by one per generated token.
// Multi-turn samples (a ToolModel with turns > 1): a sequence that reaches the end of a
// turn leaves the running list for its tool call, keeping its KV (the stated policy:
// kept, so the return prefills only the observation); its slot is free for others
// meanwhile. When the call returns (next_tool_return) it rejoins the running list at
// once, prefilling the observation's tokens. Seconds with nothing to run but tool calls
// pending count as tool_wait_seconds.
// Thread safety: none (the simulator's single thread).
// Errors: aspen::Error for a unit whose prompt alone exceeds the KV cache.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "aspen/rollout/engine.h"
#include "aspen/sim/cost_model.h"
#include "aspen/sim/imports.h"
#include "aspen/sim/workload.h"

namespace aspen::sim {

struct SimulatedUnitDone {
  int64_t unit = 0;                   // the caller's id (the dock lease)
  std::vector<int64_t> lengths;       // response tokens per sample, in add order
  int64_t version = 0;                // the weights' version at its first step
};

// A unit taken out of the engine (partial rollouts' cut, over-sampling's abort): each
// sample's tokens so far, in add order (a finished sample's whole length).
struct SimulatedUnitProgress {
  int64_t unit = 0;
  std::vector<int64_t> generated;
  int64_t version = 0;
};

struct InstanceCounters {
  int64_t steps = 0;
  int64_t scheduled_tokens = 0;
  int64_t preemptions = 0;
  double busy_seconds = 0;
  int64_t tool_calls = 0;
  double tool_wait_seconds = 0;  // idle with tool calls pending
};

class SimulatedInstance {
 public:
  // `tools`: multi-turn samples (null or one turn: single-turn); it must outlive this.
  SimulatedInstance(const CostModel& costs, int64_t max_num_seqs, int64_t max_num_batched_tokens,
                    const ToolModel* tools = nullptr);

  // `group` and `samples` (each length's sample index; empty: 0, 1, ...) seed the tool
  // latencies, so a sample waits the same wherever it runs.
  void add_unit(int64_t unit, int64_t prompt_tokens, const std::vector<int64_t>& lengths,
                int64_t version, int64_t group = 0, std::vector<int64_t> samples = {});
  // A unit resumed from a cut (partial rollouts): `generated[i]` tokens of sample i exist
  // already (< lengths[i]: it runs on, prefilling prompt + its tokens as a sequence of its
  // own, as RolloutEngine resumes a GeneratedPrefix; >= lengths[i]: it is done). At least
  // one sample must be unfinished.
  void resume_unit(int64_t unit, int64_t prompt_tokens, const std::vector<int64_t>& lengths,
                   const std::vector<int64_t>& generated, int64_t version, int64_t group = 0,
                   std::vector<int64_t> samples = {});
  // Takes out every unit that `pick(unit, version, longest)` accepts (longest: its longest
  // unfinished sample's tokens so far); their KV is freed. Nothing may be in flight
  // (between finish_segment and start_segment).
  template <typename Pick>
  std::vector<SimulatedUnitProgress> take_units(Pick pick);
  // pipeline.interrupt: every running sequence recomputes its KV (prompt + tokens) on the
  // new weights, as if preempted.
  void recompute_running();
  bool idle() const { return running_.empty() && waiting_.empty() && tool_wait_.empty(); }
  // When the first pending tool call returns; infinity when none is pending.
  double next_tool_return() const;
  bool in_segment() const { return segment_steps_ > 0; }
  QueueState queue_state() const;
  const InstanceCounters& counters() const { return counters_; }

  // Plans the next segment from `now` (nothing may be in flight); returns its duration
  // (0 when idle).
  double start_segment(double now);
  // The segment ends at the first step boundary at or after `now` instead (an arrival
  // the scheduler would take at the next step); returns the new end time.
  double cut_segment(double now);
  double segment_end() const { return segment_start_ + segment_duration_; }
  // Applies the planned segment (its end time has come); returns the units it finished.
  std::vector<SimulatedUnitDone> finish_segment();
  // Busy without stepping (e.g. loading weights): counted in busy_seconds.
  void add_busy(double seconds) { counters_.busy_seconds += seconds; }

 private:
  struct Unit {
    int64_t id = 0;
    int64_t prompt = 0;
    int64_t version = 0;
    int64_t group = 0;
    std::vector<int64_t> samples;            // sample index per position
    std::vector<std::vector<int64_t>> ends;  // multi-turn: turn ends per sample
    int64_t resident = 0;  // its sequences holding KV (the prompt's KV lives while > 0)
    int64_t unfinished = 0;
    std::vector<int64_t> targets;  // response length per sample
    std::vector<int64_t> lengths;  // generated, filled as samples finish
  };
  struct Seq {
    size_t unit = 0;     // index into units_
    int64_t index = 0;   // its sample (the unit's first sample before the fork)
    int64_t fanout = 1;  // > 1: the unit's prompt sequence, forking into this many
    int64_t generated = 0;
    int64_t prefill_left = 0;  // tokens to compute before it decodes
    int64_t kv_own = 0;        // its own tokens' KV (the prompt's is the unit's)
    int64_t turn = 0;          // multi-turn: the turn it generates
    int64_t observed = 0;      // observation tokens in its context
    double tool_until = 0;     // in tool_wait_: when its call returns
  };

  int64_t target_of(const Seq& seq) const { return units_[seq.unit].targets[static_cast<size_t>(seq.index)]; }
  // Where its current turn ends (its target when single-turn or in its last turn).
  int64_t stop_of(const Seq& seq) const;
  void return_tool_calls(double now);  // calls returned by `now` rejoin the running list
  bool admit_front();  // the front waiting sequence joins if it fits
  void add_token(Seq& seq, int64_t tokens);
  void preempt_newest();
  void release(const Seq& seq);  // its KV (and its unit's prompt when the last leaves)
  double context_of(const Seq& seq) const;
  int64_t longest_unfinished(size_t unit) const;
  SimulatedUnitProgress remove_unit(size_t unit);

  const CostModel& costs_;
  const int64_t max_num_seqs_;
  const int64_t max_num_batched_tokens_;
  const int64_t kv_capacity_;
  std::vector<Unit> units_;
  std::vector<size_t> free_units_;
  std::vector<Seq> running_;  // admission order
  std::deque<Seq> waiting_;
  std::vector<Seq> tool_wait_;  // multi-turn: out on a tool call, KV kept
  const ToolModel* tools_ = nullptr;
  double tool_idle_since_ = -1;  // >= 0: idle with tool calls pending since then
  int64_t kv_used_ = 0;
  // The planned segment.
  double segment_start_ = 0;
  double segment_duration_ = 0;
  int64_t segment_steps_ = 0;
  bool segment_prefill_ = false;  // one mixed step (prefill chunks + decodes)
  std::vector<int64_t> segment_chunks_;  // [running index] tokens this mixed step
  InstanceCounters counters_;
};

template <typename Pick>
std::vector<SimulatedUnitProgress> SimulatedInstance::take_units(Pick pick) {
  std::vector<size_t> chosen;
  for (size_t u = 0; u < units_.size(); ++u) {
    const Unit& unit = units_[u];
    if (unit.unfinished == 0) continue;  // a free slot
    if (pick(unit.id, unit.version, longest_unfinished(u))) chosen.push_back(u);
  }
  std::vector<SimulatedUnitProgress> taken;
  for (size_t u : chosen) taken.push_back(remove_unit(u));
  return taken;
}

}  // namespace aspen::sim
