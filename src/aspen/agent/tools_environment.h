// ToolsEnvironment (kind "tools"): the built-in environment of issue #35 item 4c. The
// model's turn is parsed for <tool_call> blocks (tool_call_parser.h); each call runs
// through the ToolBox and its result comes back as a "tool" message. A turn without a
// tool call is the final answer: the episode is done and its reward is the verifier's
// score of that turn's text.
//
// Data rows: {"messages": [...]} (HF/OpenAI chat messages, chat_message_json.h) or
// {"prompt": "..."} (one user message). The whole row goes to the verifier, so it holds
// the answer in whatever field the verifier reads. A row with neither throws aspen::Error
// naming the field (a data bug, found at the first row, not a per-trajectory fault).
//
// Limits, each counted in StepMetrics:
//   max_turns              the model's turns per episode. The turn that reaches it with a
//                          tool call ends the episode (max_turns_reached) without running
//                          the calls, whose results the model would never read; reward 0,
//                          as a single-turn answer with no answer in it scores.
//   max_observation_bytes  per tool response: a longer one is cut at a UTF-8 character
//                          boundary, with a line saying how much was cut
//                          (observations_truncated).
//   tool_timeout_s         per call: a call that has not returned by then gets the error
//                          observation "error: tool 'x' timed out after N s" (tool_timeouts,
//                          tool_errors) and the episode goes on. The call itself is left to
//                          finish on a detached thread that holds the tool box, bounded by
//                          the tool's own limits (the python tool's wall timeout, the
//                          calculator's evaluation limit); its result is discarded. So the
//                          trajectory never waits on a tool longer than this, whatever the
//                          tool does.
// Calls of one turn run one after another, in order.
// A verifier that throws ends the trajectory with a kRefused error naming it.
// Thread safety: as Environment; the tool box and verifier may be shared by instances
// (ToolBox is const-safe; the verifier must be safe to call concurrently).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "aspen/agent/environment.h"
#include "aspen/agent/imports.h"
#include "aspen/agent/tool_box.h"

namespace aspen::agent {

struct ToolsEnvironmentOptions {
  int max_turns = 8;
  size_t max_observation_bytes = 8 << 10;
  double tool_timeout_s = 30;
};

// The reward of a final answer: (the final turn's text, the data row) -> reward.
using AnswerVerifier =
    std::function<double(const std::string& answer, const nlohmann::ordered_json& row)>;

class ToolsEnvironment : public Environment {
 public:
  // Throws aspen::Error for a null tool box or verifier, or options out of range.
  ToolsEnvironment(std::shared_ptr<const ToolBox> tools, AnswerVerifier verifier,
                   ToolsEnvironmentOptions options = {});

  std::string kind() const override { return "tools"; }
  ResetResult reset(const nlohmann::ordered_json& row) override;
  StepResult step(const std::string& turn) override;

  // The model's turns in the current episode so far.
  int turns() const { return turns_; }

 private:
  std::shared_ptr<const ToolBox> tools_;
  AnswerVerifier verifier_;
  ToolsEnvironmentOptions options_;
  nlohmann::ordered_json row_;
  bool active_ = false;
  int turns_ = 0;
};

}  // namespace aspen::agent
