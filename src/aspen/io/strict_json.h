// Strict JSON parsing for file formats whose meaning a lenient parser would change.
//
// nlohmann::json silently keeps the last of two equal keys in one object and
// reports invalid UTF-8 as a generic syntax error. For safetensors headers and
// model index files a repeated key is ambiguous (which tensor is meant?), so this
// parser rejects it. Objects keep their key order as written (ordered_json),
// which callers use to report entries in file order.
//
// Thread safety: a pure function; safe to call concurrently.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "aspen/io/imports.h"

namespace aspen::io {

// True if bytes [data, data + size) are well-formed UTF-8 (no overlongs, no
// surrogates, nothing above U+10FFFF).
bool is_valid_utf8(const char* data, std::size_t size);

// Parses `text` as one JSON document. Throws aspen::Error naming `source` for
// invalid UTF-8, a syntax error, or a key repeated within one object (the error
// names the key).
nlohmann::ordered_json parse_strict_json(const std::string& text, const std::string& source);

}  // namespace aspen::io
