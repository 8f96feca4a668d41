#include "aspen/agent/tool_box.h"

#include <exception>

#include "aspen/agent/imports.h"
#include "aspen/util/error.h"

namespace aspen::agent {

void ToolBox::add(std::shared_ptr<const Tool> tool) {
  check_input(tool != nullptr, "no tool given", "tool box");
  check_input(find(tool->name()) == nullptr, "two tools are named '" + tool->name() + "'",
              "tool box", "tool names must be unique");
  tools_.push_back(std::move(tool));
}

std::vector<nlohmann::ordered_json> ToolBox::schemas() const {
  std::vector<nlohmann::ordered_json> out;
  for (const auto& tool : tools_) out.push_back(tool->schema());
  return out;
}

const Tool* ToolBox::find(const std::string& name) const {
  for (const auto& tool : tools_) {
    if (tool->name() == name) return tool.get();
  }
  return nullptr;
}

std::vector<std::string> ToolBox::names() const {
  std::vector<std::string> out;
  for (const auto& tool : tools_) out.push_back(tool->name());
  return out;
}

ToolResult ToolBox::execute(const ParsedToolCall& call) const {
  if (!call.ok()) return ToolResult::failure(call.error);
  const Tool* tool = find(call.call.name);
  if (tool == nullptr) {
    std::string known;
    for (const std::string& name : names()) known += (known.empty() ? "" : ", ") + name;
    return ToolResult::failure("unknown tool '" + call.call.name +
                               "'; the tools are: " + (known.empty() ? "(none)" : known));
  }
  try {
    return tool->call(call.call.arguments);
  } catch (const std::exception& e) {
    return ToolResult::failure("tool '" + tool->name() + "' failed: " + e.what());
  }
}

}  // namespace aspen::agent
