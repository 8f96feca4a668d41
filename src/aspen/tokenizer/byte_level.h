// ByteLevel mapping (GPT-2, used by HF's ByteLevel pre-tokenizer and decoder): every
// byte 0..255 is shown as one printable code point, so BPE vocabularies can be
// written as text. Printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') map to
// themselves; the other 68 bytes map, in byte order, to U+0100, U+0101, ... .
// Contract: `char_of` and `byte_of` are inverse bijections between bytes and those
// 256 code points. Thread safety: immutable tables, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer::byte_level {

// The code point that shows byte `b`.
char32_t char_of(uint8_t b);

// The UTF-8 text of `char_of(b)` (1 or 2 bytes).
const std::string& text_of(uint8_t b);

// The byte a code point shows, or nullopt when `cp` is not one of the 256.
std::optional<uint8_t> byte_of(char32_t cp);

// Maps raw bytes to their ByteLevel text ("hi there" -> "hiĠthere").
std::string encode(std::string_view bytes);

// Maps ByteLevel text (well-formed UTF-8) back to bytes. Returns nullopt when some
// code point is not a ByteLevel character; HF then keeps that token's text as is.
std::optional<std::string> decode(std::string_view text);

}  // namespace aspen::tokenizer::byte_level
