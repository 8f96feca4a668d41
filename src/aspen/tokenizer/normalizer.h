// Normalizer: the `normalizer` section of tokenizer.json. Supported: null (identity),
// {"type":"NFC"} and a {"type":"Sequence"} of those — what Qwen2/2.5/3 use. Anything
// else is rejected at load time, because silently skipping a normaliser would change
// the ids.
// Contract: `apply` takes well-formed UTF-8 and returns well-formed UTF-8.
// Thread safety: immutable after construction; const methods are safe concurrently.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer {

class Normalizer {
 public:
  // Parses the `normalizer` value; `source` names the file in errors.
  static Normalizer from_json(const nlohmann::json& spec, const std::string& source);

  bool is_identity() const { return !nfc_; }

  // Returns `text` normalised. `scratch` holds the result when it differs from the
  // input; the returned view points into `text` or `scratch`.
  std::string_view apply(std::string_view text, std::string& scratch) const;

 private:
  bool nfc_ = false;
};

// Unicode Normalization Form C of well-formed UTF-8 `text`.
std::string to_nfc(std::string_view text);

}  // namespace aspen::tokenizer
