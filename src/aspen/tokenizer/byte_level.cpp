#include "aspen/tokenizer/byte_level.h"

#include <array>

#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/utf8.h"

namespace aspen::tokenizer::byte_level {
namespace {

bool shows_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> char_of{};
  std::array<std::string, 256> text_of;
  // Every mapped code point is below U+0200, so the inverse fits a flat table.
  std::array<int16_t, 0x200> byte_of{};

  Tables() {
    byte_of.fill(-1);
    char32_t next_extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = shows_itself(b) ? static_cast<char32_t>(b) : next_extra++;
      char_of[b] = cp;
      utf8::append_code_point(cp, text_of[b]);
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables kTables;
  return kTables;
}

}  // namespace

char32_t char_of(uint8_t b) {
  return tables().char_of[b];
}

const std::string& text_of(uint8_t b) {
  return tables().text_of[b];
}

std::optional<uint8_t> byte_of(char32_t cp) {
  if (cp >= 0x200 || tables().byte_of[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().byte_of[cp]);
}

std::string encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.text_of[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    char32_t cp = 0;
    pos += utf8::decode_at(text, pos, &cp);
    const std::optional<uint8_t> b = byte_of(cp);
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace aspen::tokenizer::byte_level
