#include "aspen/tokenizer/chat_message_json.h"

#include "aspen/tokenizer/imports.h"
#include "aspen/util/error.h"

namespace aspen::tokenizer {

ToolCall tool_call_from_json(const nlohmann::ordered_json& call, const std::string& where) {
  check_input(call.is_object(), "a tool call must be an object, got " + call.dump(), where);
  // OpenAI wraps the call in "function"; HF's templates unwrap it the same way.
  const bool wrapped = call.contains("function");
  const nlohmann::ordered_json& function = wrapped ? call["function"] : call;
  const std::string at = wrapped ? where + ".function" : where;
  check_input(function.is_object(), "\"function\" must be an object", at);
  check_input(function.contains("name") && function["name"].is_string(),
              "a tool call needs a string \"name\"", at);
  check_input(function.contains("arguments") && !function["arguments"].is_null(),
              "a tool call needs \"arguments\" (an object, or its JSON text as a string)", at);
  return {function["name"].get<std::string>(), function["arguments"]};
}

ChatMessage chat_message_from_json(const nlohmann::ordered_json& message,
                                   const std::string& where) {
  check_input(message.is_object() && message.contains("role") && message["role"].is_string(),
              "a chat message must be an object with a string \"role\"", where);
  ChatMessage out{message["role"].get<std::string>(), ""};
  if (message.contains("content") && !message["content"].is_null()) {
    check_input(message["content"].is_string(), "\"content\" must be a string or null",
                where + ".content");
    out.content = message["content"].get<std::string>();
  }
  if (message.contains("tool_calls") && !message["tool_calls"].is_null()) {
    const nlohmann::ordered_json& calls = message["tool_calls"];
    check_input(calls.is_array(), "\"tool_calls\" must be an array", where + ".tool_calls");
    for (size_t i = 0; i < calls.size(); ++i) {
      out.tool_calls.push_back(
          tool_call_from_json(calls[i], where + ".tool_calls[" + std::to_string(i) + "]"));
    }
  }
  return out;
}

std::vector<ChatMessage> chat_messages_from_json(const nlohmann::ordered_json& messages,
                                                 const std::string& where) {
  check_input(messages.is_array(), "chat messages must be an array", where);
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    out.push_back(chat_message_from_json(messages[i], where + "[" + std::to_string(i) + "]"));
  }
  return out;
}

}  // namespace aspen::tokenizer
