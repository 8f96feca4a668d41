// AgentSessions: the bring-your-own-agent sessions of one run, shared by the agent
// programs' runner (which opens a session per trajectory and closes it when its program
// has printed its reward) and the OpenAI endpoint's connection threads (which record
// each call in its session's SessionLedger).
//
// A call names its session (the request's `user` field or the X-Aspen-Session header:
// serve/agent_endpoint.h). It is refused, with the metric that counts it, when the
// session:
//   - is not one of this run's       unknown session      agent_unknown_session_calls
//   - was closed (its program has    late call            agent_late_calls
//     printed its reward)
//   - has a call in flight           concurrent call      agent_concurrent_calls
//   - breaks the prefix rule under   prefix break         agent_prefix_breaks
//     PrefixBreak::kRefuse           (kSplit counts the split instead and goes on)
//   - has generated max_turns turns  turn limit           agent_turn_limit
//   - would start from a context of  token limit          agent_token_limit
//     max_context_tokens or more
// A refused call leaves the session as it was; what it recorded so far still trains.
// A call still generating when its session closes finishes on its own, and its tokens
// are dropped: the trajectory is what the program had when it printed its reward.
//
// Session ids are 32 random hex digits (std::random_device): a program cannot guess
// another trajectory's id, so one program's calls never land in another's trajectory.
// Closed ids are remembered (the last kRememberedClosed) to tell a late call from an
// unknown one.
//
// Thread safety: every method may be called from any thread. One lock guards the table;
// each session has its own, so that rendering-sized work (encoding a long prompt) for one
// session does not wait on another's.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aspen/agent/imports.h"
#include "aspen/agent/session_ledger.h"
#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/error.h"
#include "aspen/util/mutex.h"

namespace aspen::agent {

// Why a call was refused: the HTTP status to answer with, and the metric counting it.
class SessionRefused : public Error {
 public:
  SessionRefused(int status, std::string metric, std::string problem)
      : Error(std::move(problem), "session"), status_(status), metric_(std::move(metric)) {}
  int status() const { return status_; }
  const std::string& metric() const { return metric_; }

 private:
  int status_;
  std::string metric_;
};

// What a session leaves when it closes.
struct ClosedSession {
  std::vector<AgentSegment> segments;  // each with at least one turn
  int64_t turns = 0;
  int64_t prefix_breaks = 0;
  bool call_in_flight = false;  // a call was still generating: its tokens are dropped
};

// Bounds of one session's trajectory (0: none): the turns its calls generate, and the
// tokens of its context (prompt, generated and environment tokens) a call may start
// from; the endpoint also caps a call's max_tokens to what the bound leaves.
struct AgentSessionLimits {
  int64_t max_turns = 0;
  int64_t max_context_tokens = 0;
};

class AgentSessions {
 public:
  static constexpr size_t kRememberedClosed = 1 << 16;

  AgentSessions(std::shared_ptr<const Tokenizer> tokenizer, PrefixBreak on_break,
                AgentSessionLimits limits = {});
  const AgentSessionLimits& limits() const { return limits_; }
  // 32 random hex digits (std::random_device): a session id, or a run's API key.
  static std::string random_secret();

  // A new session and its id.
  std::string open();
  // Ends the session: later calls are late. aspen::Error for an id that is not open.
  ClosedSession close(const std::string& id);

  // The endpoint's side (SessionLedger's protocol). begin_call throws SessionRefused.
  std::vector<TokenId> begin_call(const std::string& id, const std::string& prompt_text);
  // Of a call begin_call accepted. Nothing happens when the session closed meanwhile.
  void finish_call(const std::string& id, const std::vector<TokenId>& generated,
                   const std::vector<float>& logprobs, const std::vector<int64_t>& versions,
                   int64_t tool_calls = 0, int64_t tool_errors = 0);
  void cancel_call(const std::string& id);

  // Counters since construction, by metric name: agent_calls (calls accepted),
  // agent_unknown_session_calls, agent_late_calls, agent_concurrent_calls,
  // agent_turn_limit, agent_token_limit, agent_prefix_breaks (splits, counted when the
  // split call finishes, plus refused breaks).
  std::map<std::string, int64_t> metrics() const;
  int64_t open_sessions() const;

 private:
  struct Session {
    explicit Session(const Tokenizer& tokenizer, PrefixBreak on_break)
        : ledger(tokenizer, on_break) {}
    Mutex mutex;
    SessionLedger ledger GUARDED_BY(mutex);
  };
  std::shared_ptr<Session> find(const std::string& id) const;
  void count(const std::string& metric);

  std::shared_ptr<const Tokenizer> tokenizer_;
  PrefixBreak on_break_;
  AgentSessionLimits limits_;
  mutable Mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Session>> open_ GUARDED_BY(mutex_);
  std::unordered_set<std::string> closed_ GUARDED_BY(mutex_);
  std::deque<std::string> closed_order_ GUARDED_BY(mutex_);
  std::map<std::string, int64_t> metrics_ GUARDED_BY(mutex_);
};

}  // namespace aspen::agent
