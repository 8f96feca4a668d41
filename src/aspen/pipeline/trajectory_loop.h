// TrajectoryLoop: the environment side of a rollout instance's multi-turn trajectories
// (issue #35, items 2, 6 and 7). The instance's engine generates the model turns; this
// loop runs everything else off the engine's thread, so that while a trajectory waits
// on a tool, the environment or a slow reset, the engine keeps stepping the others
// (ASP across tool time).
//
// Per trajectory (a claimed row, named by its TrajectoryKey):
//   start(key, row)        reset() of a fresh environment on the loop's threads; its
//                          conversation rendered by the chat template (tools, generation
//                          prompt) and tokenized: the trajectory's prompt. Then it is
//                          ready for its first turn.
//   poll()                 what is ready: next turns to generate (context = prompt +
//                          response, token for token; max_tokens = the per-turn cap,
//                          bounded by what max_trajectory_tokens leaves) and finished
//                          trajectories.
//   turn_finished(key, c)  the engine's finished turn is appended as generated; its
//                          text (decoded, without the end-of-turn token) goes to step()
//                          on the loop's threads; the observations come back as the
//                          tokens of observation_suffix() (trajectory.h), or the
//                          trajectory ends.
// A trajectory ends when the environment says done (its reward), at max_turns model
// turns or when max_trajectory_tokens leaves no room for another turn (reward 0, as a
// run out of turns scores in the tools environment), or on an environment fault (the
// one-line error kept; environment.h: faults never throw and never hang).
//
// KV policy while a trajectory waits (stated, issue #35 item 6): its sequence finishes
// in the engine, so its KV blocks are released; their full blocks stay in the prefix
// cache until evicted, and the next turn re-prefills only what was evicted plus the
// observation tokens (rollout/block_pool.h). Waiting trajectories still count in the
// instance's load (waiting(): the dispatcher sees them, rollout_worker.h).
//
// Threads: `threads` workers run resets and steps; each trajectory has at most one
// call in flight, so an environment instance is never used by two threads at once.
// Environments are pooled: a trajectory takes an idle one (the factory makes one when
// none is idle) and gives it back when it ends, so a command environment's process
// serves episode after episode (as many processes as trajectories run at once) instead
// of starting per trajectory. reset() starts each episode afresh (environment.h).
// Thread safety: start/turn_finished/poll/waiting/forget from one thread (the
// instance's); the workers only touch a trajectory while its call is in flight.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "aspen/agent/environment.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/trajectory.h"
#include "aspen/pipeline/trajectory_source.h"
#include "aspen/tokenizer/chat_template.h"
#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/mutex.h"

namespace aspen::pipeline {

struct TrajectoryLoopOptions {
  int64_t max_turns = 8;                // model turns per trajectory
  int64_t max_turn_tokens = 256;        // tokens per model turn (rollout.max_tokens)
  int64_t max_trajectory_tokens = 1024; // response tokens (model + observation) per trajectory
  bool enable_thinking = true;          // Qwen3's switch, as the prompt was rendered
  int threads = 4;                      // workers running resets and steps
};

using EnvironmentFactory = std::function<std::unique_ptr<agent::Environment>()>;

class TrajectoryLoop : public TrajectorySource {
 public:

  // aspen::Error for options out of range or a tokenizer without the template's
  // end-of-turn token ("<|im_end|>").
  TrajectoryLoop(TrajectoryLoopOptions options, EnvironmentFactory factory,
                 std::shared_ptr<const Tokenizer> tokenizer, ChatTemplate chat_template);
  ~TrajectoryLoop() override;
  TrajectoryLoop(const TrajectoryLoop&) = delete;
  TrajectoryLoop& operator=(const TrajectoryLoop&) = delete;

  void start(const TrajectoryKey& key, nlohmann::ordered_json row) override;
  void turn_finished(const TrajectoryKey& key, const Completion& turn) override;
  // The worker ends the trajectory (its context outgrew the engine).
  bool turn_refused(const TrajectoryKey& key, const std::string& error) override;
  void poll(std::vector<NextTurn>& next, std::vector<Finished>& finished) override;
  void wait_ready(double seconds) override;
  // Trajectories inside the environment now (reset or step in flight, or ready but not
  // yet polled).
  int64_t waiting() const override;
  // Drops every trajectory of `lease` (its claim was given up); a call in flight
  // finishes on its worker and is discarded.
  void forget(int64_t lease);
  TokenId end_of_turn() const override { return end_of_turn_; }

 private:
  struct State {
    Trajectory trajectory;
    std::unique_ptr<agent::Environment> environment;
    nlohmann::ordered_json row;
  };
  struct Job {
    TrajectoryKey key;
    std::shared_ptr<State> state;
    std::string turn_text;  // empty: the reset
    bool reset = false;
  };
  void work();
  // On a worker: runs the job's call and files its outcome as ready.
  void run_job(Job& job);
  void finish(const TrajectoryKey& key, std::shared_ptr<State> state) REQUIRES(mutex_);
  void next_turn(const TrajectoryKey& key, const State& state) REQUIRES(mutex_);

  TrajectoryLoopOptions options_;
  EnvironmentFactory factory_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  ChatTemplate template_;
  TokenId end_of_turn_ = 0;
  std::map<TrajectoryKey, std::shared_ptr<State>> states_;  // the instance thread's
  mutable Mutex mutex_;
  CondVar ready_cv_;
  CondVar jobs_cv_;
  std::deque<Job> jobs_ GUARDED_BY(mutex_);
  std::vector<std::unique_ptr<agent::Environment>> idle_ GUARDED_BY(mutex_);
  std::vector<NextTurn> next_ GUARDED_BY(mutex_);
  std::vector<Finished> finished_ GUARDED_BY(mutex_);
  int64_t in_environment_ GUARDED_BY(mutex_) = 0;
  std::set<int64_t> forgotten_ GUARDED_BY(mutex_);  // leases given up
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace aspen::pipeline
