// JSON parsing with a bound on nesting depth, for input Aspen does not control
// (tokenizer.json, JSONL datasets and so stdin of `aspen logprobs` / `aspen tokenize`).
//
// nlohmann::json parses iteratively, but copying, comparing and dumping a value
// recurse once per level: a line of 100,000 '[' parses and then overflows the
// stack wherever the value is used. parse_json_bounded refuses a document nested
// deeper than `max_depth` arrays/objects (kMaxJsonDepth unless told otherwise)
// while parsing, before any such value exists. Real files nest a few levels
// (tokenizer.json: 5, chat-message datasets: 3), so the bound costs nothing.
//
// Errors: aspen::Error naming `source` for a syntax error or a document nested
// deeper than the bound ("JSON nested deeper than 512 levels").
// Header-only (the tokenizer module, which links no io, uses it too).
// Thread safety: a pure function; safe to call concurrently.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "aspen/util/error.h"

namespace aspen {

// The deepest nesting of arrays and objects parse_json_bounded accepts by default.
constexpr int kMaxJsonDepth = 512;

// Parses `text` as one JSON document of at most `max_depth` nested arrays/objects
// (a scalar is depth 0, `[]` depth 1). Throws aspen::Error naming `source`.
inline nlohmann::json parse_json_bounded(std::string_view text, const std::string& source,
                                         int max_depth = kMaxJsonDepth) {
  // The callback's depth is the number of arrays/objects already open when a value
  // starts; an array or object starting at depth d is nested d + 1 deep.
  const nlohmann::json::parser_callback_t limit_depth =
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& /*parsed*/) {
        using Event = nlohmann::json::parse_event_t;
        if ((event == Event::object_start || event == Event::array_start) && depth >= max_depth) {
          throw Error("JSON nested deeper than " + std::to_string(max_depth) + " levels", source,
                      "flatten the document");
        }
        return true;
      };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), limit_depth);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed JSON: ") + e.what(), source);
  }
}

}  // namespace aspen
