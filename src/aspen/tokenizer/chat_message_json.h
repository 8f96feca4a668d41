// Chat messages from JSON, in the shape HF's apply_chat_template and OpenAI's chat API
// take them: {"role", "content", "tool_calls"?}. A tool call is {"name", "arguments"} or
// OpenAI's {"id"?, "type": "function", "function": {"name", "arguments"}}.
//
// Contract:
//   - role: a string (which roles a template accepts is ChatTemplate::render's business);
//   - content: a string, or null/absent for "" (OpenAI sends null beside tool_calls;
//     qwen2.5 renders both alike, HF's qwen3 template would fail on None);
//   - tool_calls: absent, null or an array; each call needs a string name and an
//     "arguments" (an object, or OpenAI's JSON text as a string; see ToolCall).
// Anything else throws aspen::Error naming `where` and the field ("messages[2].tool_calls[0]").
// Parse the JSON as nlohmann::ordered_json: the arguments are printed back in their own
// key order (python_json.h), and nlohmann::json would have sorted them.
// Thread safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/tokenizer/chat_template.h"
#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer {

ToolCall tool_call_from_json(const nlohmann::ordered_json& call, const std::string& where);
ChatMessage chat_message_from_json(const nlohmann::ordered_json& message, const std::string& where);
// `messages` must be an array; element i is read with where + "[i]".
std::vector<ChatMessage> chat_messages_from_json(const nlohmann::ordered_json& messages,
                                                 const std::string& where);

}  // namespace aspen::tokenizer
