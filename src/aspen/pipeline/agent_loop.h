// AgentLoop: the agent-program side of a rollout instance's trajectories under
// rollout.agent.command (bring your own agent, issue #35 item 5). It is the instance's
// TrajectorySource, as TrajectoryLoop is under rollout.environment, so the worker
// drives both with one code path (rollout_worker_trajectories.cpp).
//
// Each instance serves its own OpenAI-compatible endpoint (serve/agent_endpoint.h) on
// 127.0.0.1, an ephemeral port. Per trajectory (a claimed row, named by its key):
//   start(key, row)  a runner thread runs the agent program once (agent/agent_program.h:
//                    OPENAI_BASE_URL this endpoint, OPENAI_API_KEY the loop's secret,
//                    ASPEN_SESSION the trajectory's session, the row on stdin).
//   a call           the endpoint's HTTP thread checks it against the session's ledger
//                    (the prefix rule: agent/session_ledger.h) and submits the ledger's
//                    tokens here; the call becomes a next turn that poll() hands to the
//                    worker, whose thread adds it to its engine: the HTTP thread never
//                    touches the engine, it waits on the call's stream.
//   turn_finished    the engine's turn answers the call (the ledger records exactly
//                    those tokens, log-probs and policy versions).
//   the program ends its trajectory is what the ledger recorded, with the printed
//                    reward; a fault (timeout, crash, garbage, oversized output, no
//                    calls) ends it with the one-line error (TrajectoryEnd::kEnvironment:
//                    rollout.environment.on_error applies, as to an environment's fault).
// So the endpoint always serves the instance's current policy: in-flight weight updates
// happen between engine steps as for any request, and each token carries its version.
//
// A session split by a prefix break (PrefixBreak::kSplit) has several segments; a dock
// row is one sequence, so the trajectory trains on the LAST segment, the context the
// program's reward was earned in; the earlier ones are counted
// (agent_untrained_segments), not trained.
//
// A call whose client went away is given up (cancel); if its turn is already in the
// engine it runs to its end and is dropped. Destruction kills the programs still
// running (AgentProgram::cancel), fails the calls still waiting and stops the endpoint.
// Thread safety: the TrajectorySource methods from the instance's thread; the endpoint
// and the runners have threads of their own and meet it under one lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "aspen/agent/agent_program.h"
#include "aspen/agent/agent_sessions.h"
#include "aspen/pipeline/imports.h"
#include "aspen/pipeline/trajectory_source.h"
#include "aspen/rollout/sampling_params.h"
#include "aspen/tokenizer/chat_template.h"
#include "aspen/tokenizer/tokenizer.h"

namespace aspen::pipeline {

struct AgentLoopOptions {
  std::string command;      // rollout.agent.command
  double timeout_s = 600;   // rollout.agent.timeout_s
  int max_concurrent = 8;   // rollout.agent.max_concurrent: programs at once (runner threads)
  AgentSessionLimits limits;  // per session: turns, context tokens
  PrefixBreak on_break = PrefixBreak::kSplit;
  int64_t max_turn_tokens = 256;  // rollout.max_tokens: caps every call's max_tokens
  int64_t max_model_len = 2048;   // the engine's: prompt + generated tokens per call
  // The run's sampling (temperature, top-p, top-k): every call samples it, whatever the
  // program asks (serve/agent_endpoint.h).
  SamplingParams sampling;
};

class AgentLoop : public TrajectorySource {
 public:
  // Binds the endpoint and starts its threads. aspen::Error for options out of range, a
  // tokenizer without "<|im_end|>" or a port that cannot be bound.
  AgentLoop(AgentLoopOptions options, std::shared_ptr<const Tokenizer> tokenizer,
            ChatTemplate chat_template);
  ~AgentLoop() override;
  AgentLoop(const AgentLoop&) = delete;
  AgentLoop& operator=(const AgentLoop&) = delete;

  void start(const TrajectoryKey& key, nlohmann::ordered_json row) override;
  void turn_finished(const TrajectoryKey& key, const Completion& turn) override;
  // The call is answered with the engine's error (HTTP 400); the program goes on.
  bool turn_refused(const TrajectoryKey& key, const std::string& error) override;
  void poll(std::vector<NextTurn>& next, std::vector<Finished>& finished) override;
  void wait_ready(double seconds) override;
  // Trajectories whose program runs with no call in the engine.
  int64_t waiting() const override;
  TokenId end_of_turn() const override;
  // AgentSessions' and AgentProgram's metrics, and agent_untrained_segments.
  std::map<std::string, int64_t> counters() const override;
  // The endpoint's base URL (http://127.0.0.1:PORT/v1).
  std::string base_url() const;

 private:
  class State;
  std::unique_ptr<State> state_;
};

}  // namespace aspen::pipeline
