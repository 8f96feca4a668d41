#include "aspen/serve/text_streamer.h"
#include "aspen/serve/imports.h"

#include <algorithm>

namespace aspen::serve {
namespace {

constexpr const char* kReplacementCharacter = "\xEF\xBF\xBD";

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

TextStreamer::TextStreamer(const Tokenizer& tokenizer, const std::vector<std::string>& stop_strings)
    : tokenizer_(tokenizer), stop_strings_(stop_strings) {
  for (const auto& stop : stop_strings) hold_back_ = std::max(hold_back_, stop.size());
  if (hold_back_ > 0) --hold_back_;
}

std::string TextStreamer::append(TokenId token) {
  tokens_.push_back(token);
  const std::string text = tokenizer_.decode(tokens_, /*skip_special_tokens=*/true);
  size_t end = text.size();
  const std::string replacement = kReplacementCharacter;
  if (end >= replacement.size() && text.compare(end - replacement.size(), replacement.size(),
                                                replacement) == 0) {
    end -= replacement.size();
  }
  end = end > hold_back_ ? end - hold_back_ : 0;
  for (const auto& stop : stop_strings_) end = std::min(end, text.find(stop));
  // Never split a UTF-8 character.
  while (end > 0 && end < text.size() && is_continuation_byte(text[end])) --end;
  if (end <= sent_.size() || text.compare(0, sent_.size(), sent_) != 0) return {};
  std::string delta = text.substr(sent_.size(), end - sent_.size());
  sent_ += delta;
  return delta;
}

std::string TextStreamer::finish(const std::string& final_text) {
  if (final_text.size() <= sent_.size() || final_text.compare(0, sent_.size(), sent_) != 0) return {};
  std::string delta = final_text.substr(sent_.size());
  sent_ = final_text;
  return delta;
}

}  // namespace aspen::serve
