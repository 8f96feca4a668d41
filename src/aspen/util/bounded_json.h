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
// It also refuses a key repeated within one object, which nlohmann::json would
// silently resolve to the last value: in a JSONL data line ({"answer": "4", "answer":
// "5"}) or a tokenizer.json vocabulary (one token listed twice) either value may be
// the one meant, so the input is ambiguous and the error names the key (and, for a
// document of several lines, the key's line).
//
// Errors: aspen::Error naming `source` for a syntax error, a repeated key or a
// document nested deeper than the bound ("JSON nested deeper than 512 levels").
// Header-only, and in util rather than io: the torch-free modules (tokenizer, reward)
// use it, and io links torch.
// Thread safety: a pure function; safe to call concurrently.
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "aspen/util/error.h"

namespace aspen {

// The deepest nesting of arrays and objects parse_json_bounded accepts by default.
constexpr int kMaxJsonDepth = 512;

namespace bounded_json_detail {

// A character iterator that records the furthest position read, so that an error
// found in the parser's callback (a repeated key) can name the line it is on.
class TrackedChars {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  TrackedChars(const char* at, const char** furthest) : at_(at), furthest_(furthest) {}
  reference operator*() const { return *at_; }
  TrackedChars& operator++() {
    if (++at_ > *furthest_) *furthest_ = at_;
    return *this;
  }
  TrackedChars operator++(int) {
    TrackedChars before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedChars& other) const { return at_ == other.at_; }
  bool operator!=(const TrackedChars& other) const { return at_ != other.at_; }

 private:
  const char* at_;
  const char** furthest_;
};

}  // namespace bounded_json_detail

// Parses `text` as one JSON document of at most `max_depth` nested arrays/objects
// (a scalar is depth 0, `[]` depth 1) in which no object repeats a key. Throws
// aspen::Error naming `source`.
// Json: nlohmann::json, or nlohmann::ordered_json where the order of keys must survive
// (a tool call's arguments, rendered back into a prompt: tokenizer/python_json.h).
template <class Json>
Json parse_json_bounded_as(std::string_view text, const std::string& source,
                           int max_depth = kMaxJsonDepth) {
  const char* furthest = text.data();
  std::vector<std::unordered_set<std::string>> open_objects;  // the keys seen in each
  // The callback's depth is the number of arrays/objects already open when a value
  // starts; an array or object starting at depth d is nested d + 1 deep.
  const typename Json::parser_callback_t check =
      [&](int depth, typename Json::parse_event_t event, Json& parsed) {
        using Event = typename Json::parse_event_t;
        if ((event == Event::object_start || event == Event::array_start) && depth >= max_depth) {
          throw Error("JSON nested deeper than " + std::to_string(max_depth) + " levels", source,
                      "flatten the document");
        }
        if (event == Event::object_start) {
          open_objects.emplace_back();
        } else if (event == Event::object_end) {
          if (!open_objects.empty()) open_objects.pop_back();
        } else if (event == Event::key && !open_objects.empty() &&
                   !open_objects.back()
                        .insert(parsed.template get_ref<const std::string&>())
                        .second) {
          // The parser has just read the key's closing quote: `furthest` is on its line.
          const auto line = 1 + std::count(text.data(), furthest, '\n');
          const bool one_line = text.find('\n') == std::string_view::npos;
          throw Error("duplicate key " + parsed.dump() + " in one JSON object" +
                          (one_line ? "" : " (line " + std::to_string(line) + ")"),
                      source, "each key may appear once per object");
        }
        return true;
      };
  try {
    return Json::parse(bounded_json_detail::TrackedChars(text.data(), &furthest),
                       bounded_json_detail::TrackedChars(text.data() + text.size(), &furthest),
                       check);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("malformed JSON: ") + e.what(), source);
  }
}

inline nlohmann::json parse_json_bounded(std::string_view text, const std::string& source,
                                         int max_depth = kMaxJsonDepth) {
  return parse_json_bounded_as<nlohmann::json>(text, source, max_depth);
}

}  // namespace aspen
