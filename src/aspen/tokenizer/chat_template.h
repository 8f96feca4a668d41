// ChatTemplate: turns a conversation into the prompt text a Qwen-family model was trained
// on, exactly as `tokenizer.apply_chat_template(messages, tokenize=False, ...)` renders it.
//
// Aspen has no Jinja interpreter. Instead it recognises the chat templates it knows by their
// content and renders them natively:
//   - "chatml":  plain ChatML, `<|im_start|>{role}\n{content}<|im_end|>\n` per message.
//   - "qwen2.5": ChatML that injects a default system prompt when the conversation has
//                none (Qwen2.5, Qwen2.5-Math/Coder); the prompt text is read from the
//                template itself. Tool results are wrapped in a user turn as the template does.
//                Qwen2's shorter template also injects a default system prompt but renders a
//                tool message as an ordinary turn, so it loads as "chatml" with that prompt.
//   - "qwen3":   ChatML with <think> handling: assistant turns after the last user query keep
//                their reasoning, earlier ones have it stripped; with enable_thinking=false the
//                generation prompt ends in an empty think block.
// A chat_template that is none of these throws aspen::Error ("unrecognised chat template"),
// so an unknown model never gets a silently wrong prompt.
//
// Tools (qwen2.5 and qwen3), as `apply_chat_template(messages, tools=tools, ...)` renders
// them: `tools` (JSON function schemas, printed one per line with HF's tojson, see
// python_json.h) go into the system turn under "# Tools"; an assistant message's
// tool_calls follow its content, each as
// `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`; tool messages become
// `<tool_response>` blocks in a user turn. Recognition checks the
// template's tool sections too. The chatml family has no tool format: tools or tool_calls
// with it throw aspen::Error rather than vanish from the prompt (HF would drop them
// silently). tests/tokenizer/chat_template_tools_test.cpp pins all of this against HF's
// own rendering (tools/python/chat_template_oracle.py). Qwen3's separate
// `reasoning_content` message field is not modelled: reasoning is read from the content's
// <think> block, as the template does when that field is absent.
//
// Roles: "system" (first message only), "user", "assistant", "tool". Anything else, an
// empty conversation, or a system message after the first throws aspen::Error.
// Thread safety: immutable after construction; render() may be called concurrently.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer {

// One function call of an assistant turn: HF's {"name": ..., "arguments": ...} (OpenAI's
// {"type": "function", "function": {...}} wrapper unwrapped: chat_message_json.h).
struct ToolCall {
  std::string name;
  // A JSON object, printed with HF's tojson (key order kept: ordered_json). A string is
  // taken as OpenAI's wire form (the arguments' JSON text): qwen3 prints it verbatim,
  // qwen2.5 prints it as a JSON string literal - each as its template does.
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
};

struct ChatMessage {
  std::string role;
  std::string content;
  // Assistant messages only (any other role with tool calls throws in render()). The
  // default keeps `{role, content}` initialisers valid.
  std::vector<ToolCall> tool_calls = {};
};

class ChatTemplate {
 public:
  enum class Family { kChatML, kQwen25, kQwen3 };

  // `path` is a tokenizer_config.json or a model directory that contains one; its
  // "chat_template" string is recognised as described above.
  static ChatTemplate from_config(const std::string& path);
  // Recognises Jinja template text; `source` names it in errors.
  static ChatTemplate from_template_text(const std::string& jinja, const std::string& source);
  // "chatml", "qwen2.5" (default system prompt "You are Qwen, created by Alibaba Cloud. You
  // are a helpful assistant.") or "qwen3". Throws aspen::Error for any other name.
  static ChatTemplate builtin(const std::string& name);

  // `enable_thinking` only matters for the qwen3 family (HF passes it to the template as an
  // extra variable, which the other templates ignore). `tools`: the function schemas
  // offered to the model (HF's `tools=`); empty renders as `tools=None` does.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     bool enable_thinking = true,
                     const std::vector<nlohmann::ordered_json>& tools = {}) const;

  Family family() const { return family_; }
  // "chatml", "qwen2.5" or "qwen3".
  std::string name() const;
  // The system prompt injected when the conversation has none (qwen2.5; Qwen2's chatml).
  const std::optional<std::string>& default_system_prompt() const { return default_system_; }

 private:
  ChatTemplate(Family family, std::optional<std::string> default_system)
      : family_(family), default_system_(std::move(default_system)) {}

  Family family_;
  std::optional<std::string> default_system_;
};

}  // namespace aspen::tokenizer
