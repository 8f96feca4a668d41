#include "aspen/agent/tool_call_parser.h"

#include <nlohmann/json.hpp>

#include "aspen/agent/imports.h"
#include "aspen/util/bounded_json.h"
#include "aspen/util/error.h"

namespace aspen::agent {
namespace {

std::string_view trim(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
}

// Reads one call's JSON; returns the error text, empty when the call is well-formed.
std::string read_call(std::string_view body, ToolCall& call) {
  const std::string_view json_text = trim(body);
  if (json_text.empty()) return "empty <tool_call>: expected {\"name\": ..., \"arguments\": {...}}";
  nlohmann::ordered_json value;
  try {
    value = parse_json_bounded_as<nlohmann::ordered_json>(json_text, "tool call");
  } catch (const Error& e) {
    return "invalid tool call: " + e.problem();
  }
  if (!value.is_object()) {
    return "the tool call must be a JSON object {\"name\": ..., \"arguments\": {...}}, got " +
           std::string(value.type_name());
  }
  if (!value.contains("name")) return "the tool call has no \"name\"";
  if (!value["name"].is_string() || value["name"].get_ref<const std::string&>().empty()) {
    return "the tool call's \"name\" must be a non-empty string";
  }
  call.name = value["name"].get<std::string>();
  if (value.contains("arguments")) {
    if (!value["arguments"].is_object()) {
      return "the tool call's \"arguments\" must be a JSON object, got " +
             std::string(value["arguments"].type_name());
    }
    call.arguments = std::move(value["arguments"]);
  }
  return "";
}

}  // namespace

ParsedTurn parse_tool_calls(std::string_view text) {
  ParsedTurn turn;
  size_t open = text.find(kToolCallOpen);
  turn.content = std::string(text.substr(0, open));
  while (open != std::string_view::npos) {
    ParsedToolCall parsed;
    parsed.begin = open;
    const size_t body = open + kToolCallOpen.size();
    const size_t close = text.find(kToolCallClose, body);
    const size_t next_open = text.find(kToolCallOpen, body);
    if (close == std::string_view::npos ||
        (next_open != std::string_view::npos && next_open < close)) {
      // Cut off: the block runs to the next call, or to the end of the turn.
      parsed.end = next_open == std::string_view::npos ? text.size() : next_open;
      parsed.error = next_open == std::string_view::npos
                         ? "unterminated <tool_call>: the turn ended before </tool_call>"
                         : "unterminated <tool_call>: another <tool_call> began before "
                           "</tool_call>";
    } else {
      parsed.end = close + kToolCallClose.size();
      parsed.error = read_call(text.substr(body, close - body), parsed.call);
    }
    turn.calls.push_back(std::move(parsed));
    open = text.find(kToolCallOpen, turn.calls.back().end);
  }
  return turn;
}

}  // namespace aspen::agent
