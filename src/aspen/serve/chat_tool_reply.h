// chat_tool_reply: the assistant message of a reply on the agent endpoint when the
// request offered tools: the <tool_call> blocks parsed out of the generated text
// (agent/tool_call_parser.h) become OpenAI's `tool_calls`, as vLLM's hermes parser
// returns them:
//   {"id": "call_<reply id>_<i>", "type": "function",
//    "function": {"name": ..., "arguments": "<the arguments as JSON text>"}}
// with finish_reason "tool_calls".
//
// Chosen so that a client carrying the message back verbatim renders the text the
// model wrote (the session's prefix rule, agent/session_ledger.h): the arguments are
// printed as Python's json.dumps prints them (python_json.h), as the Qwen templates
// print them back; the content is the text before the first call less ONE trailing
// newline, the one the template puts between content and call. Text after the last call
// is not part of OpenAI's message, so a turn that has some does not re-render as written
// (the ledger then splits). A turn with a malformed call is returned as plain content,
// every byte of it, without tool_calls, as vLLM does when its parser fails: the agent
// sees what the model wrote.
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "aspen/serve/imports.h"

namespace aspen::serve {

struct ToolReply {
  std::string content;
  nlohmann::json tool_calls;  // null when the text holds no (well-formed) call
  int64_t calls = 0;          // <tool_call> blocks in the text, well-formed or not
  int64_t malformed = 0;      // of which malformed
};

ToolReply chat_tool_reply(const std::string& text, const std::string& reply_id);

}  // namespace aspen::serve
