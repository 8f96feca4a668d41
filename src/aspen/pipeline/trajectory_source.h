// TrajectorySource: where a rollout instance's multi-turn trajectories come from
// (issue #35). The instance's thread owns the engine (rollout_worker.h, "turns"); a
// source runs everything else off that thread and meets it only here:
//   start(key, row)        a claimed row begins a trajectory
//   poll()                 next turns to generate (a context, token for token, and its
//                          budget) and trajectories that ended
//   turn_finished(key, c)  the engine's finished turn of a next turn
//   turn_refused(key, e)   the engine refused a next turn (a context it cannot hold)
// Two implement it: TrajectoryLoop (rollout.environment: Aspen holds the conversation
// and steps an environment between turns) and AgentLoop (rollout.agent.command: an
// agent program holds it through an OpenAI endpoint; each of its calls is a next turn).
// The worker's code that drives them is one (rollout_worker_trajectories.cpp).
// Thread safety: every method from the instance's thread; implementations say more.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/trajectory.h"
#include "aspen/rollout/engine.h"

namespace aspen::pipeline {

struct TrajectoryKey {
  int64_t lease = 0;
  int64_t group = 0;
  int64_t sample = 0;
  bool operator<(const TrajectoryKey& o) const {
    return std::tie(lease, group, sample) < std::tie(o.lease, o.group, o.sample);
  }
};

class TrajectorySource {
 public:
  struct NextTurn {
    TrajectoryKey key;
    std::vector<TokenId> context;
    int64_t max_tokens = 0;
    int64_t turn = 0;  // 0 for the first
    // The turn's own sampling (an agent's call: the run's temperature, top-p and top-k
    // with the call's seed and stop strings); nullopt: the worker's per-turn sampling of
    // the group. Either way the turn stops at end_of_turn() and max_tokens.
    std::optional<SamplingParams> params;
  };
  struct Finished {
    TrajectoryKey key;
    Trajectory trajectory;
  };

  virtual ~TrajectorySource() = default;
  virtual void start(const TrajectoryKey& key, nlohmann::ordered_json row) = 0;
  virtual void turn_finished(const TrajectoryKey& key, const Completion& turn) = 0;
  // True when the source answers the refusal itself (an agent's call gets the error and
  // its program goes on); false: the worker ends the trajectory and drops its group.
  virtual bool turn_refused(const TrajectoryKey& key, const std::string& error) = 0;
  // Moves out what became ready since the last poll.
  virtual void poll(std::vector<NextTurn>& next, std::vector<Finished>& finished) = 0;
  // Blocks up to `seconds` for something to become ready (an idle engine's wait).
  virtual void wait_ready(double seconds) = 0;
  // Trajectories outside the engine now (in their environment or agent program, or
  // ready but not yet polled): they count in the instance's load.
  virtual int64_t waiting() const = 0;
  // The end-of-turn token the turns stop at.
  virtual TokenId end_of_turn() const = 0;
  // Counters for the run's metrics (by metric name, cumulative); none by default.
  virtual std::map<std::string, int64_t> counters() const { return {}; }
};

}  // namespace aspen::pipeline
