// Tool: one built-in tool a model can call (issue #35, item 4c). Three things, nothing
// more: a name, the JSON function schema the chat template shows the model
// (ChatTemplate::render's `tools`), and call(arguments) -> the observation text.
//
// Contract for implementations:
//   - call() never throws for anything the model can get wrong (bad arguments, a failing
//     expression or program, a timeout): it returns ToolResult::failure(problem), whose
//     text is the error observation the model sees. ToolBox::execute still catches
//     std::exception, so an unexpected failure (out of memory, no fork) becomes an error
//     observation too, never a crashed rollout.
//   - call() may run concurrently from several rollout threads: a tool holds no mutable
//     state between calls (the python tool starts a fresh process per call).
//   - The result text is bounded by the tool (the python tool truncates output), since
//     it goes back into the model's context.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "aspen/agent/imports.h"

namespace aspen::agent {

struct ToolResult {
  bool ok = true;
  std::string text;  // the observation: the result, or "error: ..." when !ok

  static ToolResult success(std::string text) { return {true, std::move(text)}; }
  static ToolResult failure(const std::string& problem) { return {false, "error: " + problem}; }
};

class Tool {
 public:
  virtual ~Tool() = default;
  virtual const std::string& name() const = 0;
  // {"type": "function", "function": {"name", "description", "parameters"}}, the shape
  // Qwen's templates and OpenAI's API take.
  virtual const nlohmann::ordered_json& schema() const = 0;
  virtual ToolResult call(const nlohmann::ordered_json& arguments) const = 0;
};

}  // namespace aspen::agent
