// JSON Lines reading and writing: one JSON value per line, blank lines skipped.
// Errors name the source and the 1-based line number ("prompts.jsonl: line 7: ...").
// Not thread-safe; one reader per stream.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <istream>
#include <ostream>
#include <string>

#include "aspen/io/imports.h"

namespace aspen::io {

class JsonlReader {
 public:
  // `source` names the stream in errors: a path, or "stdin".
  JsonlReader(std::istream& in, std::string source);

  // Reads the next non-blank line into `value`. Returns false at end of input.
  // Throws aspen::Error naming source and line for malformed JSON, invalid UTF-8, a
  // number out of range, a key repeated within one object, or nesting deeper than
  // kMaxJsonDepth (util/bounded_json.h).
  bool next(nlohmann::json& value);

  // "source: line N" for the line last returned, to name it in callers' errors.
  std::string location() const;
  int64_t line_number() const { return line_number_; }

 private:
  std::istream& in_;
  std::string source_;
  int64_t line_number_ = 0;
};

// Writes `value` as one compact line and flushes, so a consumer reading a pipe
// sees each result as soon as it is ready. Invalid UTF-8 in strings becomes U+FFFD.
void write_jsonl(std::ostream& out, const nlohmann::json& value);

}  // namespace aspen::io
