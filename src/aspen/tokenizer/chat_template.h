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
// so an unknown model never gets a silently wrong prompt. Tool definitions and assistant
// tool_calls are not modelled (messages carry text only).
//
// Roles: "system" (first message only), "user", "assistant", "tool". Anything else, an
// empty conversation, or a system message after the first throws aspen::Error.
// Thread safety: immutable after construction; render() may be called concurrently.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer {

struct ChatMessage {
  std::string role;
  std::string content;
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
  // extra variable, which the other templates ignore).
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     bool enable_thinking = true) const;

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
