// ToolBox: the tools one environment offers, by name, and the one place where a parsed
// tool call becomes an observation: the tool's result, or an error observation for a
// malformed call (tool_call_parser.h), an unknown tool name, or a tool that threw.
// Thread safety: add() before sharing; then const and safe to use concurrently.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/agent/imports.h"
#include "aspen/agent/tool.h"
#include "aspen/agent/tool_call_parser.h"

namespace aspen::agent {

class ToolBox {
 public:
  // Throws aspen::Error when a tool of that name is already there.
  void add(std::shared_ptr<const Tool> tool);

  // The schemas, in the order added: ChatTemplate::render's `tools`.
  std::vector<nlohmann::ordered_json> schemas() const;
  // nullptr when there is none of that name.
  const Tool* find(const std::string& name) const;
  std::vector<std::string> names() const;

  ToolResult execute(const ParsedToolCall& call) const;

 private:
  std::vector<std::shared_ptr<const Tool>> tools_;
};

}  // namespace aspen::agent
