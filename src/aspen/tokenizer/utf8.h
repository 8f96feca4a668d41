// UTF-8 helpers for the tokenizer: strict validation of encode input, decoding of
// well-formed text, and lossy repair of decoded byte streams.
//
// "Well-formed" is the Unicode definition (no overlongs, no surrogates, nothing above
// U+10FFFF), which is what Rust's `str` guarantees HF tokenizers. `append_lossy`
// replaces each maximal ill-formed subpart with one U+FFFD, byte for byte what Rust's
// String::from_utf8_lossy (and hence HF's ByteLevel decoder) produces.
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer::utf8 {

inline constexpr size_t kAllValid = std::string_view::npos;

// Byte offset of the first byte that does not begin a well-formed sequence, or
// kAllValid when the whole of `text` is well-formed.
size_t find_invalid(std::string_view text);

// Appends `bytes` to `out`, replacing each maximal ill-formed subpart with U+FFFD.
void append_lossy(std::string_view bytes, std::string& out);

// Appends the UTF-8 encoding of code point `cp` (must be a scalar value) to `out`.
void append_code_point(char32_t cp, std::string& out);

// Decodes the code point starting at text[pos] of well-formed `text` and returns its
// length in bytes. Behaviour on ill-formed input is unspecified (never reads past end).
int decode_at(std::string_view text, size_t pos, char32_t* cp);

// Start of the code point that ends just before `pos` in well-formed `text` (pos > 0).
inline size_t previous_start(std::string_view text, size_t pos) {
  do {
    --pos;
  } while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80);
  return pos;
}

}  // namespace aspen::tokenizer::utf8
