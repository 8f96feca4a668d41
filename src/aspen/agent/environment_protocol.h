// The JSON protocol of the external environments: the `command` environment sends these
// objects as lines to a child process (command_environment.h), the `http` one POSTs them
// (http_environment.h). One request, one reply, in order.
//
//   reset  {"op": "reset", "episode": "<id>", "row": <the data row>}
//       -> {"messages": [<chat message>, ...], "tools": [<function schema>, ...]}
//          messages: HF/OpenAI chat messages (chat_message_json.h), at least one;
//          tools: optional, the schemas the chat template shows the model.
//   step   {"op": "step", "episode": "<id>", "turn": "<the model's turn as text>"}
//       -> {"observations": [<chat message>, ...], "done": bool,
//           "reward": number, "turn_reward": number}
//          not done: one or more observations, each role "tool" or "user", and no
//          "reward"; done: no observations and a "reward" (the trajectory's);
//          turn_reward: optional, either way. Rewards are finite, |r| <= 1e6 (as the
//          reward module's kMaxRewardMagnitude).
//   either -> {"error": "<message>"}: the environment refuses (an unknown episode, a
//          row it cannot use); the trajectory ends with fault kRefused and that message.
// The episode id is unique per reset (a random prefix per Aspen process and a counter),
// so that a service holding many episodes at once can tell them apart.
// Unknown keys in a reply are ignored, for extensions. Any other reply is garbage
// (kGarbage, the error quoting its first 200 bytes). The turn may hold invalid UTF-8
// (model output): it is sent with U+FFFD in place of the bad bytes.
// ProtocolEpisodes is the episode bookkeeping both transports share: reset() starts a
// new episode id, step() refuses without one, a fault or the end clears it, and each
// result carries the seconds its exchange waited.
// Thread safety: pure functions, except new_episode_id (thread-safe); a ProtocolEpisodes
// is its environment's (one trajectory at a time).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "aspen/agent/environment.h"
#include "aspen/agent/imports.h"

namespace aspen::agent {

std::string new_episode_id();

// One line of JSON each (no newline in it).
std::string reset_request(const std::string& episode, const nlohmann::ordered_json& row);
std::string step_request(const std::string& episode, const std::string& turn);

// The reply parsed; on a malformed reply the result's error is set (kGarbage), on
// {"error": ...} too (kRefused), its message starting with `source` ("command environment
// `python3 env.py`"). Never throws for any reply text.
ResetResult parse_reset_reply(std::string_view reply, const std::string& source);
StepResult parse_step_reply(std::string_view reply, const std::string& source);

class ProtocolEpisodes {
 public:
  // Sends one request and returns its reply; sets `error` instead on a fault.
  using Exchange =
      std::function<std::string(const std::string& request, std::optional<EnvironmentError>* error)>;
  // `source` starts every error message ("http environment http://...").
  explicit ProtocolEpisodes(std::string source) : source_(std::move(source)) {}

  ResetResult reset(const nlohmann::ordered_json& row, const Exchange& exchange);
  StepResult step(const std::string& turn, const Exchange& exchange);

 private:
  std::string source_;
  std::string episode_;  // empty: no episode in progress
};

}  // namespace aspen::agent
