// Chat template recognition and rendering (tokenizer/chat_template.h). Input: Jinja
// template text, a NUL byte, then the conversation: one message per line, "role:content"
// (content may use \n escapes). A template that is not recognised falls back to a
// builtin one so the rendering is fuzzed either way.
// Checks: recognition and rendering work or throw aspen::Error; every message's content
// appears in the rendered prompt (assistant turns may lose their <think> part, so only
// user and system contents are checked).
#include <sstream>

#include "aspen/tokenizer/chat_template.h"
#include "fuzz_common.h"

namespace {

std::string unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == 'n') {
      out += '\n';
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [jinja, conversation] = aspen::fuzz::split_at_nul(data, size);
  std::vector<aspen::tokenizer::ChatMessage> messages;
  std::istringstream lines{std::string(conversation)};
  std::string line;
  while (std::getline(lines, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    messages.push_back({line.substr(0, colon), unescape(line.substr(colon + 1))});
  }
  ASPEN_FUZZ_CONTRACT({
    std::optional<aspen::tokenizer::ChatTemplate> chat;
    try {
      chat = aspen::tokenizer::ChatTemplate::from_template_text(std::string(jinja), "tokenizer_config.json");
    } catch (const aspen::Error&) {
      static const char* const kBuiltins[] = {"chatml", "qwen2.5", "qwen3"};
      chat = aspen::tokenizer::ChatTemplate::builtin(kBuiltins[size % 3]);
    }
    const std::string prompt = chat->render(messages, size % 2 == 0, size % 4 < 2);
    for (const auto& message : messages) {
      if (message.role == "user" || message.role == "system") {
        aspen::fuzz::require(prompt.find(message.content) != std::string::npos,
                             "user and system contents appear in the prompt");
      }
    }
  });
  return 0;
}
