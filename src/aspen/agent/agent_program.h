// AgentProgram: bring your own agent (issue #35, item 5). With rollout.agent.command:
// PROGRAM, each trajectory is one run of PROGRAM (a shell command), which holds its
// episode through Aspen's OpenAI-compatible endpoint and prints its reward:
//
//   environment  OPENAI_BASE_URL  the endpoint, e.g. http://127.0.0.1:41234/v1
//                OPENAI_API_KEY   this run's secret (the endpoint answers 401 without it)
//                ASPEN_SESSION    the trajectory's session id: send it as the request's
//                                 `user` field or in the X-Aspen-Session header
//   stdin        the data row, one JSON line
//   stdout       one JSON line: {"reward": x} (x finite, |x| <= 1e6); nothing else
//   stderr       free; the last max_stderr_bytes are quoted in the error when it fails
//
// The trajectory is what the session's ledger recorded (agent_sessions.h,
// session_ledger.h): exactly the tokens the engine generated for the program's calls,
// with the environment's tokens between them. The session is closed as soon as the
// program prints its reward line, or when it ends without one: later calls are refused
// as late (agent_late_calls), and a call still generating then is dropped.
//
// Faults: each gives the episode a one-line `error` and counts in its metric; none
// hangs or throws, and the program's whole process group is killed when it ends.
//   timeout      ran past timeout_s: killed                      agent_timeouts
//   crash        exited non-zero, or died of a signal            agent_crashes
//   garbage      stdout is not exactly one {"reward": x} line    agent_garbage
//   oversized    more than max_stdout_bytes on stdout            agent_oversized
//   no calls     a reward, but no call with its session id       agent_no_calls
//                (never called, or called with a wrong session id: those calls were
//                refused as agent_unknown_session_calls)
//   cancelled    cancel() (the run is over): killed, or never    agent_cancelled
//                started
// An episode with a fault is dropped by the caller (its reward is not a score of its
// tokens); `segments` still says what was generated.
//
// A bounded pool: at most max_concurrent programs run at once; run() waits for a slot,
// so the rollout side may call it from as many threads as it likes.
// Thread safety: run() may be called concurrently; metrics() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/agent/agent_process.h"
#include "aspen/agent/agent_sessions.h"
#include "aspen/agent/imports.h"
#include "aspen/agent/session_ledger.h"
#include "aspen/util/mutex.h"

namespace aspen::agent {

struct AgentProgramOptions {
  std::string command;   // run with /bin/sh -c in Aspen's working directory
  std::string base_url;  // OPENAI_BASE_URL
  std::string api_key;   // OPENAI_API_KEY: the run's secret
  double timeout_s = 600;
  int max_concurrent = 8;
  size_t max_stdout_bytes = size_t{64} << 10;
  size_t max_stderr_bytes = size_t{4} << 10;
};

enum class AgentFault { kNone, kTimeout, kCrash, kGarbage, kOversized, kNoCalls, kCancelled };
// The metric that counts a fault: "agent_timeouts", "agent_crashes", ... ("" for kNone).
std::string agent_fault_metric(AgentFault fault);

struct AgentEpisode {
  std::string session;
  std::vector<AgentSegment> segments;  // each with at least one turn
  double reward = 0;                   // when fault == kNone
  AgentFault fault = AgentFault::kNone;
  std::string error;  // one line, when fault != kNone
  int64_t turns = 0;
  int64_t tool_calls = 0;   // over the segments (AgentSegment::tool_calls)
  int64_t tool_errors = 0;
  int64_t prefix_breaks = 0;
  double wall_s = 0;

  bool ok() const { return fault == AgentFault::kNone; }
};

// {"reward": x} as the program printed it (its whole stdout): the reward, or an error
// saying what is wrong with the output. Pure; exposed for tests.
struct RewardLine {
  double reward = 0;
  std::string error;  // empty when the line is good
};
RewardLine parse_reward_line(const std::string& stdout_text);

class AgentProgram {
 public:
  // `sessions` outlives the program runner.
  AgentProgram(AgentProgramOptions options, AgentSessions& sessions);

  // One trajectory: opens a session, runs the program on `row` and closes the session.
  // `opened` is called with the session id before the program starts (the rollout side
  // maps the session's calls to its trajectory).
  AgentEpisode run(const nlohmann::ordered_json& row,
                   const std::function<void(const std::string& session)>& opened = {})
      EXCLUDES(mutex_);
  // Kills the programs running now and ends those waiting for a slot (their episodes'
  // fault is kCancelled), and every later run() at once: the run is over.
  void cancel() EXCLUDES(mutex_);

  // Counts since construction: agent_episodes, agent_timeouts, agent_crashes,
  // agent_garbage, agent_oversized, agent_no_calls, agent_cancelled.
  std::map<std::string, int64_t> metrics() const EXCLUDES(mutex_);
  const AgentProgramOptions& options() const { return options_; }

 private:
  AgentEpisode finish(const std::string& session, const AgentProcessRun& process,
                      ClosedSession closed) const;

  AgentProgramOptions options_;
  AgentSessions& sessions_;
  mutable Mutex mutex_;
  CondVar slot_free_;
  int running_ GUARDED_BY(mutex_) = 0;
  std::atomic<bool> cancelled_{false};
  std::map<std::string, int64_t> metrics_ GUARDED_BY(mutex_);
};

}  // namespace aspen::agent
