// parse_chat_tools: the tool-calling parts of a chat request on the agent endpoint
// (ServeContext::tool_calls): the messages with their tool calls and tool results, the
// tool schemas and tool_choice, read from the body in the client's key order.
//
//   tools        a list of {"type": "function", "function": {"name", ...}} schemas; each
//                is handed to the chat template as given (HF's `tools=`)
//   tool_choice  "auto" (the default) or "none" (the reply is not parsed for calls);
//                "required" and a named function are refused: nothing forces the engine
//                to produce a call
//   messages     OpenAI's shapes (tokenizer/chat_message_json.h), content as a string,
//                null or a list of text parts; "tool" messages' tool_call_id and name
//                are accepted and not rendered (the Qwen templates do not print them)
//   stream       refused together with tools: calls are parsed from the whole reply
//
// A tool call's string arguments (OpenAI's wire form, what every client sends back)
// are parsed into an object when they hold one, as vLLM does before rendering: the
// template then prints them with json.dumps, as the model wrote them, and the rendered
// conversation extends what the engine saw (agent/session_ledger.h).
//
// Errors: RequestError (400) naming the field ("messages[2].tool_calls[0]", "tools[1]").
// Thread safety: a pure function.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "aspen/serve/imports.h"
#include "aspen/tokenizer/chat_template.h"

namespace aspen::serve {

struct ChatTools {
  std::vector<ChatMessage> messages;
  std::vector<nlohmann::ordered_json> tools;
  bool parse_calls = false;  // tools were given and tool_choice is not "none"
};

ChatTools parse_chat_tools(const nlohmann::ordered_json& body, bool stream);

}  // namespace aspen::serve
