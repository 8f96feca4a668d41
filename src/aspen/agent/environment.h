// Environment: what a multi-turn trajectory talks to (issue #35, item 4). One interface,
// three kinds: built-in tools (tools_environment.h), a child process speaking JSON lines
// (command_environment.h) and an HTTP service (http_environment.h).
//
// An episode:
//   reset(row)   -> the conversation the model starts from (and the tool schemas the
//                   chat template shows it), from one data row;
//   step(turn)   -> after each model turn: the observations to append (tool or user
//                   messages), whether the episode is done, and its reward when it is.
// reset() may be called at any time and starts a new episode (a fault ends the episode:
// the next call must be reset()).
//
// Token contract (issue #35, item 2: no re-tokenization drift). The caller keeps the
// trajectory as tokens: the prompt as the chat template renders reset()'s messages with
// the generation prompt, then per turn exactly the tokens the engine generated, then the
// observation tokens. It never decodes the model's tokens and re-encodes them, and never
// re-renders the conversation: the observation tokens are the tokenization of
// observation_suffix() (observation_suffix.h), the text the template puts after an
// assistant turn's content - its end-of-turn marker, the observation messages and the
// next generation prompt - exactly as it renders it in the whole conversation. The turn
// text given to step() is the engine's decoded text, used only to parse tool calls and
// answers; what is trained on is the tokens.
//
// Faults never escape as exceptions and never hang: a crashed, hung, garbled or
// oversized environment ends the trajectory with `error` set (kind and message) and done;
// the caller drops or scores it per its configuration. The one exception: reset() of
// the tools environment throws aspen::Error for a data row it cannot read (a bug in the
// data, found at the first row, not a fault of one trajectory). Limits that are hit
// without ending the trajectory (a tool timeout, an observation cut) are counted in
// StepMetrics.
// Thread safety: an instance serves one trajectory at a time (callers do not share one
// between threads); separate instances are independent.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "aspen/agent/imports.h"
#include "aspen/tokenizer/chat_template.h"

namespace aspen::agent {

// Why an environment ended a trajectory. Stable names (environment_fault_name) for
// metrics: env_errors_<name>.
enum class EnvironmentFault {
  kNone,
  kCrash,      // the process exited or closed its output; the service refused the connection
  kTimeout,    // no complete reply within the per-call timeout (a command is killed)
  kGarbage,    // a reply that is not JSON, or not of the protocol's shape
  kOversized,  // a reply over the size cap
  kRefused,    // the environment answered with an error: {"error": ...}, HTTP 4xx/5xx,
               // or a call out of order (step before reset)
};
std::string environment_fault_name(EnvironmentFault fault);  // "crash", "timeout", ...

struct EnvironmentError {
  EnvironmentFault fault = EnvironmentFault::kNone;
  std::string message;  // one line, naming the environment
};

// The per-step figures a run's metrics aggregate (tool calls, tool errors, tool wait,
// limits hit).
struct StepMetrics {
  int tool_calls = 0;
  int tool_errors = 0;    // observations that are errors: malformed/unknown call, tool failure
  int tool_timeouts = 0;  // calls cut by the per-tool timeout (counted in tool_errors too)
  int observations_truncated = 0;  // observations cut to max observation bytes
  size_t observation_bytes = 0;    // of the observations returned, after any cut
  bool max_turns_reached = false;  // this step ended the episode at the turn limit
  double wait_seconds = 0;         // time spent in the environment (tools, process, HTTP)
};

struct ResetResult {
  std::vector<ChatMessage> messages;          // the conversation the model starts from
  std::vector<nlohmann::ordered_json> tools;  // ChatTemplate::render's `tools`
  std::optional<EnvironmentError> error;      // set: no episode started
  double wait_seconds = 0;
};

struct StepResult {
  std::vector<ChatMessage> observations;  // "tool" or "user" messages, in order
  bool done = false;
  // The trajectory's reward: set on the step that ends the episode (never with error).
  std::optional<double> reward;
  // An optional reward for this turn alone (per-turn rewards, issue #35 item 1).
  std::optional<double> turn_reward;
  std::optional<EnvironmentError> error;  // set: the trajectory failed; done is true
  StepMetrics metrics;
};

// Which trajectory an episode is: the dock's group id and the sample's index within its
// group. Both are the same in every run of a config and on every rank, unlike the order
// in which a pool's environments happen to start episodes.
struct EpisodeId {
  int64_t group = 0;
  int64_t sample = 0;
};

class Environment {
 public:
  virtual ~Environment() = default;
  // "tools", "command", "http" or "synthetic" (synthetic_environment.h: a benchmark workload).
  virtual std::string kind() const = 0;
  // `row`: one data row. ordered_json: its messages may hold tool-call arguments whose key
  // order the prompt keeps, and the command and http environments pass it on as it is.
  virtual ResetResult reset(const nlohmann::ordered_json& row) = 0;
  // reset() for the trajectory `episode` (the trajectory loop calls this one). An
  // environment whose episodes draw randomness seeds it from `episode`, so a run's
  // trajectories are the same whatever order they start in; the default ignores it.
  virtual ResetResult reset_episode(const nlohmann::ordered_json& row, const EpisodeId& episode) {
    (void)episode;
    return reset(row);
  }
  // `turn`: the model's turn as decoded text (without the end-of-turn token).
  virtual StepResult step(const std::string& turn) = 0;
};

// A StepResult that ends the trajectory with a fault.
StepResult failed_step(EnvironmentFault fault, std::string message);

// The conversation a built-in environment starts from: a row's {"messages": [...]}
// (HF/OpenAI chat messages, chat_message_json.h) or {"prompt": "..."} as one user
// message. aspen::Error naming `where` for a row with neither (a data bug).
std::vector<ChatMessage> conversation_of_row(const nlohmann::ordered_json& row,
                                             const std::string& where);

}  // namespace aspen::agent
