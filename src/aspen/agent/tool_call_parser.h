// Tool calls out of a model's turn, in the Qwen2.5/Qwen3 (Hermes) format the chat
// template teaches (tokenizer/chat_template.h):
//   <tool_call>
//   {"name": "calculator", "arguments": {"expression": "2**100"}}
//   </tool_call>
// A turn may hold several calls; each <tool_call> opening tag yields exactly one
// ParsedToolCall, in order, well-formed or not, so a caller answers every call the model
// made, and a malformed one gets an error observation instead of silence or a crash.
//
// A call is malformed, with `error` saying why in words meant for the model, when:
//   - its closing tag is missing (the turn ended, or another <tool_call> began first);
//   - the text between the tags is not one JSON object (a syntax error, duplicate keys,
//     nesting deeper than kMaxJsonDepth, invalid UTF-8: parse_json_bounded's rules);
//   - "name" is missing, not a string, or empty;
//   - "arguments" is present but not an object. An absent "arguments" is {} (a call of
//     a tool without parameters), as SGLang's Qwen parser reads it.
// Other keys are ignored. Text outside the tags is not a call; a stray </tool_call> is
// ordinary text. `content` is the text before the first <tool_call>, what vLLM's hermes
// parser (and so an OpenAI client) reports as the message content beside the calls.
//
// Never throws for any input (the robustness test feeds random and truncated text).
// The arguments are ordered_json: rendered back into a prompt, they keep their key order.
// Pure function; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "aspen/agent/imports.h"
#include "aspen/tokenizer/chat_template.h"

namespace aspen::agent {

struct ParsedToolCall {
  ToolCall call;      // name and arguments; meaningful only when ok()
  std::string error;  // why the call is malformed; empty when it is well-formed
  // The block in the turn's text: from its opening tag to past its closing tag (or to
  // where the block was cut off).
  size_t begin = 0;
  size_t end = 0;

  bool ok() const { return error.empty(); }
};

struct ParsedTurn {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

ParsedTurn parse_tool_calls(std::string_view text);

inline constexpr std::string_view kToolCallOpen = "<tool_call>";
inline constexpr std::string_view kToolCallClose = "</tool_call>";

}  // namespace aspen::agent
