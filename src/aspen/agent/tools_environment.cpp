#include "aspen/agent/tools_environment.h"

#include <chrono>
#include <cmath>
#include <exception>
#include <future>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>

#include "aspen/agent/imports.h"
#include "aspen/agent/tool_call_parser.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"

namespace aspen::agent {
namespace {

// "0.05", "30": as the option was written.
std::string timeout_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

// Runs the call on a thread of its own and waits at most `timeout_s` for it. The thread
// holds the tool box and the result's promise, so abandoning it is safe: it finishes
// within the tool's own limits and nobody reads what it sets.
ToolResult execute_with_timeout(const std::shared_ptr<const ToolBox>& tools,
                                const ParsedToolCall& call, double timeout_s, bool* timed_out) {
  auto promise = std::make_shared<std::promise<ToolResult>>();
  std::future<ToolResult> result = promise->get_future();
  try {
    std::thread([tools, call, promise] {
      try {
        promise->set_value(tools->execute(call));
      } catch (const std::exception& e) {  // execute() catches the tool's; this is bad_alloc
        promise->set_value(ToolResult::failure(std::string("tool call failed: ") + e.what()));
      }
    }).detach();
  } catch (const std::system_error& e) {  // no thread to be had: the call fails, the run goes on
    return ToolResult::failure(std::string("tool call not started: ") + e.what());
  }
  if (result.wait_for(std::chrono::duration<double>(timeout_s)) == std::future_status::ready) {
    return result.get();
  }
  *timed_out = true;
  return ToolResult::failure("tool '" + call.call.name + "' timed out after " +
                             timeout_text(timeout_s) + " s");
}

// `text` cut to at most `max_bytes` at a character boundary (observations are valid
// UTF-8: the tools make them so), with a line saying what was cut.
std::string truncate_observation(const std::string& text, size_t max_bytes) {
  size_t keep = max_bytes;
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xC0) == 0x80) --keep;
  return text.substr(0, keep) + "\n[observation truncated: showed the first " +
         std::to_string(keep) + " of " + std::to_string(text.size()) + " bytes]";
}

}  // namespace

ToolsEnvironment::ToolsEnvironment(std::shared_ptr<const ToolBox> tools, AnswerVerifier verifier,
                                   ToolsEnvironmentOptions options)
    : tools_(std::move(tools)), verifier_(std::move(verifier)), options_(options) {
  const std::string where = "tools environment";
  check_input(tools_ != nullptr, "no tool box", where);
  check_input(static_cast<bool>(verifier_), "no verifier", where);
  check_input(options_.max_turns >= 1, "max_turns must be at least 1", where);
  check_input(options_.max_observation_bytes >= 1, "max_observation_bytes must be at least 1",
              where);
  check_input(std::isfinite(options_.tool_timeout_s) && options_.tool_timeout_s > 0,
              "tool_timeout_s must be a positive number of seconds", where);
}

ResetResult ToolsEnvironment::reset(const nlohmann::ordered_json& row) {
  const std::string where = "tools environment: data row";
  ResetResult result;
  result.messages = conversation_of_row(row, where);
  result.tools = tools_->schemas();
  row_ = row;
  active_ = true;
  turns_ = 0;
  return result;
}

StepResult ToolsEnvironment::step(const std::string& turn) {
  if (!active_) {
    return failed_step(EnvironmentFault::kRefused,
                       "tools environment: step without an episode (call reset first)");
  }
  ++turns_;
  const ParsedTurn parsed = parse_tool_calls(turn);
  StepResult result;
  if (parsed.calls.empty()) {
    active_ = false;
    result.done = true;
    const auto start = std::chrono::steady_clock::now();
    try {
      result.reward = verifier_(turn, row_);
    } catch (const std::exception& e) {
      return failed_step(EnvironmentFault::kRefused,
                         std::string("tools environment: the verifier failed: ") + e.what());
    }
    result.metrics.wait_seconds = seconds_since(start);
    return result;
  }
  if (turns_ >= options_.max_turns) {
    active_ = false;
    result.done = true;
    result.reward = 0.0;
    result.metrics.max_turns_reached = true;
    return result;
  }
  const auto start = std::chrono::steady_clock::now();
  for (const ParsedToolCall& call : parsed.calls) {
    bool timed_out = false;
    ToolResult outcome = execute_with_timeout(tools_, call, options_.tool_timeout_s, &timed_out);
    ++result.metrics.tool_calls;
    result.metrics.tool_errors += outcome.ok ? 0 : 1;
    result.metrics.tool_timeouts += timed_out ? 1 : 0;
    if (outcome.text.size() > options_.max_observation_bytes) {
      outcome.text = truncate_observation(outcome.text, options_.max_observation_bytes);
      ++result.metrics.observations_truncated;
    }
    result.metrics.observation_bytes += outcome.text.size();
    result.observations.push_back({"tool", std::move(outcome.text)});
  }
  result.metrics.wait_seconds = seconds_since(start);
  return result;
}

}  // namespace aspen::agent
