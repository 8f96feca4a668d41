#include "aspen/agent/agent_sessions.h"

#include <cstdio>
#include <random>

#include "aspen/agent/imports.h"

namespace aspen::agent {
namespace {

std::string random_hex() {
  std::random_device device;
  std::string id;
  for (int part = 0; part < 4; ++part) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(device()));
    id += hex;
  }
  return id;
}

}  // namespace

AgentSessions::AgentSessions(std::shared_ptr<const Tokenizer> tokenizer, PrefixBreak on_break,
                             AgentSessionLimits limits)
    : tokenizer_(std::move(tokenizer)), on_break_(on_break), limits_(limits) {
  check_input(tokenizer_ != nullptr, "no tokenizer", "agent sessions");
  check_input(limits_.max_turns >= 0 && limits_.max_context_tokens >= 0, "limits must be >= 0",
              "agent sessions");
}

std::string AgentSessions::random_secret() { return random_hex(); }

std::string AgentSessions::open() {
  MutexLock lock(mutex_);
  std::string id = random_hex();
  while (open_.count(id) || closed_.count(id)) id = random_hex();
  open_.emplace(id, std::make_shared<Session>(*tokenizer_, on_break_));
  return id;
}

ClosedSession AgentSessions::close(const std::string& id) {
  std::shared_ptr<Session> session;
  {
    MutexLock lock(mutex_);
    const auto found = open_.find(id);
    check_input(found != open_.end(), "no open session of that id", "session " + id);
    session = found->second;
    open_.erase(found);
    closed_.insert(id);
    closed_order_.push_back(id);
    if (closed_order_.size() > kRememberedClosed) {
      closed_.erase(closed_order_.front());
      closed_order_.pop_front();
    }
  }
  ClosedSession closed;
  {
    MutexLock lock(session->mutex);
    SessionLedger& ledger = session->ledger;
    closed.call_in_flight = ledger.call_open();
    for (const AgentSegment& segment : ledger.segments()) {
      if (segment.turns() > 0) closed.segments.push_back(segment);
    }
    closed.turns = ledger.turns();
    closed.prefix_breaks = ledger.prefix_breaks();
  }
  return closed;
}

std::shared_ptr<AgentSessions::Session> AgentSessions::find(const std::string& id) const {
  MutexLock lock(mutex_);
  const auto found = open_.find(id);
  return found == open_.end() ? nullptr : found->second;
}

void AgentSessions::count(const std::string& metric) {
  MutexLock lock(mutex_);
  ++metrics_[metric];
}

std::vector<TokenId> AgentSessions::begin_call(const std::string& id,
                                               const std::string& prompt_text) {
  std::shared_ptr<Session> session = find(id);
  if (session == nullptr) {
    bool late = false;
    {
      MutexLock lock(mutex_);
      late = closed_.count(id) > 0;
    }
    if (late) {
      count("agent_late_calls");
      throw SessionRefused(409, "agent_late_calls",
                           "session " + id + " is closed: its agent program already printed its "
                                             "reward, so this call would train nothing");
    }
    count("agent_unknown_session_calls");
    throw SessionRefused(403, "agent_unknown_session_calls",
                         "unknown session '" + id.substr(0, 64) +
                             "': pass the ASPEN_SESSION of your program as `user` or in the "
                             "X-Aspen-Session header");
  }
  try {
    MutexLock lock(session->mutex);
    SessionLedger& ledger = session->ledger;
    if (limits_.max_turns > 0 && ledger.turns() >= limits_.max_turns && !ledger.call_open()) {
      count("agent_turn_limit");
      throw SessionRefused(409, "agent_turn_limit",
                           "session " + id + " has generated its " +
                               std::to_string(limits_.max_turns) +
                               " turns (the run's turn limit); print the reward");
    }
    std::vector<TokenId> prompt = ledger.begin_call(prompt_text);
    if (limits_.max_context_tokens > 0 &&
        static_cast<int64_t>(prompt.size()) >= limits_.max_context_tokens) {
      ledger.cancel_call();
      count("agent_token_limit");
      throw SessionRefused(400, "agent_token_limit",
                           "the session's context would be " + std::to_string(prompt.size()) +
                               " tokens, over the run's limit of " +
                               std::to_string(limits_.max_context_tokens) +
                               " per trajectory; print the reward");
    }
    count("agent_calls");
    return prompt;
  } catch (const CallInProgress& error) {
    count("agent_concurrent_calls");
    throw SessionRefused(409, "agent_concurrent_calls", error.problem());
  } catch (const PrefixBroken& error) {
    count("agent_prefix_breaks");
    throw SessionRefused(400, "agent_prefix_breaks", error.problem());
  }
}

void AgentSessions::finish_call(const std::string& id, const std::vector<TokenId>& generated,
                                const std::vector<float>& logprobs,
                                const std::vector<int64_t>& versions, int64_t tool_calls,
                                int64_t tool_errors) {
  std::shared_ptr<Session> session = find(id);
  if (session == nullptr) return;
  int64_t breaks = 0;
  {
    MutexLock lock(session->mutex);
    const int64_t before = session->ledger.prefix_breaks();
    session->ledger.finish_call(generated, logprobs, versions, tool_calls, tool_errors);
    breaks = session->ledger.prefix_breaks() - before;
  }
  if (breaks > 0) count("agent_prefix_breaks");
}

void AgentSessions::cancel_call(const std::string& id) {
  std::shared_ptr<Session> session = find(id);
  if (session == nullptr) return;
  MutexLock lock(session->mutex);
  session->ledger.cancel_call();
}

std::map<std::string, int64_t> AgentSessions::metrics() const {
  MutexLock lock(mutex_);
  std::map<std::string, int64_t> metrics = {{"agent_calls", 0},
                                            {"agent_unknown_session_calls", 0},
                                            {"agent_late_calls", 0},
                                            {"agent_concurrent_calls", 0},
                                            {"agent_turn_limit", 0},
                                            {"agent_token_limit", 0},
                                            {"agent_prefix_breaks", 0}};
  for (const auto& [name, value] : metrics_) metrics[name] = value;
  return metrics;
}

int64_t AgentSessions::open_sessions() const {
  MutexLock lock(mutex_);
  return static_cast<int64_t>(open_.size());
}

}  // namespace aspen::agent
