#include "aspen/serve/chat_tools.h"

#include <string>

#include "aspen/serve/imports.h"
#include "aspen/serve/openai_request.h"
#include "aspen/tokenizer/chat_message_json.h"
#include "aspen/util/bounded_json.h"

namespace aspen::serve {
namespace {

using nlohmann::ordered_json;

[[noreturn]] void bad_tools_field(const std::string& field, const std::string& problem) {
  throw RequestError(400, problem, field);
}

bool tools_field_given(const ordered_json& body, const char* field) {
  return body.contains(field) && !body[field].is_null();
}

// The message with its content parts joined into one string, as the plain chat path does.
ordered_json flat_content(ordered_json message, const std::string& field) {
  if (!message.is_object() || !message.contains("content") || !message["content"].is_array()) {
    return message;
  }
  std::string text;
  for (const ordered_json& part : message["content"]) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      bad_tools_field(field + ".content",
                      "content parts must be {\"type\": \"text\", \"text\": \"...\"}");
    }
    text += part["text"].get<std::string>();
  }
  message["content"] = text;
  return message;
}

}  // namespace

ChatTools parse_chat_tools(const ordered_json& body, bool stream) {
  ChatTools out;
  if (tools_field_given(body, "tools")) {
    const ordered_json& tools = body["tools"];
    if (!tools.is_array()) bad_tools_field("tools", "tools must be a list of function schemas");
    for (size_t i = 0; i < tools.size(); ++i) {
      const ordered_json& tool = tools[i];
      const std::string field = "tools[" + std::to_string(i) + "]";
      if (!tool.is_object() || tool.value("type", "") != "function" || !tool.contains("function") ||
          !tool["function"].is_object() || !tool["function"].contains("name") ||
          !tool["function"]["name"].is_string()) {
        bad_tools_field(
            field, "a tool must be {\"type\": \"function\", \"function\": {\"name\": ..., ...}}");
      }
      out.tools.push_back(tool);
    }
  }
  std::string choice = "auto";
  if (tools_field_given(body, "tool_choice")) {
    const ordered_json& tool_choice = body["tool_choice"];
    if (!tool_choice.is_string() || (tool_choice != "auto" && tool_choice != "none")) {
      bad_tools_field("tool_choice",
                      "only \"auto\" and \"none\" are supported (nothing forces a call)");
    }
    choice = tool_choice.get<std::string>();
  }
  out.parse_calls = !out.tools.empty() && choice == "auto";
  if (out.parse_calls && stream) {
    bad_tools_field("stream",
                    "streaming with tools is not supported: calls are parsed from the whole reply");
  }
  const ordered_json& messages = body["messages"];
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string field = "messages[" + std::to_string(i) + "]";
    ChatMessage message;
    try {
      message = chat_message_from_json(flat_content(messages[i], field), field);
    } catch (const RequestError&) {
      throw;
    } catch (const Error& error) {
      bad_tools_field(error.input(), error.problem());
    }
    for (ToolCall& call : message.tool_calls) {
      if (!call.arguments.is_string()) continue;
      try {
        ordered_json arguments = parse_json_bounded_as<ordered_json>(
            call.arguments.get<std::string>(), field + ".tool_calls", 64);
        if (arguments.is_object()) call.arguments = std::move(arguments);
      } catch (const Error&) {
        // Not JSON: printed verbatim, as the template prints a string.
      }
    }
    out.messages.push_back(std::move(message));
  }
  return out;
}

}  // namespace aspen::serve
