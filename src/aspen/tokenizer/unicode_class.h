// Unicode character classes with the exact definitions of Rust's `regex` crate, which
// HF uses for added-token word boundaries and stripping:
//   is_word:        \w = Alphabetic | Mark | Decimal_Number | Connector_Punctuation
//                        | Join_Control
//   is_white_space: \s = White_Space (includes U+0085 and U+00A0)
// Backed by PCRE2's Unicode property tables (compiled once, then a JIT match per
// call): these are only consulted next to added tokens, never per byte of text.
// Thread safety: safe from any thread.
#pragma once

#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer::unicode_class {

bool is_word(char32_t cp);
bool is_white_space(char32_t cp);

}  // namespace aspen::tokenizer::unicode_class
