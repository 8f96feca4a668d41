// Tokenizer: HF `tokenizer.json` byte-level BPE as Qwen2/2.5/3 use it.
//
// Pipeline (same as HF tokenizers): split out added tokens (honouring
// lstrip/rstrip/single_word/normalized) -> NFC normaliser -> Split pre-tokenizer
// (the Qwen Unicode regex) -> ByteLevel byte->unicode mapping -> BPE merges by rank.
// Contract: `encode` returns exactly the ids HF `encode(text, add_special_tokens=False)`
// returns for any valid UTF-8 text; special tokens that occur in the text are
// recognised. Invalid UTF-8 input throws aspen::Error.
// Thread safety: a constructed Tokenizer is immutable; all const methods may be
// called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer {

using TokenId = int32_t;

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory that contains one.
  // Throws aspen::Error naming the file and the problem for anything unsupported
  // (a model type other than BPE, an unknown normaliser/pre-tokenizer, bad JSON).
  static Tokenizer from_file(const std::string& path);
  // Parses tokenizer.json text; `source` names it in errors. Any malformed input is an
  // aspen::Error: JSON nested deeper than kMaxJsonDepth (util/bounded_json.h), a value of
  // the wrong JSON type, or a model vocab id at or above 2 x (number of vocab entries)
  // + 1024 (so a small file cannot declare an id that allocates gigabytes; real files
  // number their vocab densely from 0).
  static Tokenizer from_json(const std::string& json_text, const std::string& source);

  std::vector<TokenId> encode(std::string_view text) const;
  // Encodes each text, spreading the work over `threads` threads (<= 0: all cores).
  std::vector<std::vector<TokenId>> encode_batch(const std::vector<std::string>& texts,
                                                 int threads = 0) const;
  // Inverse of encode. Byte sequences that are not valid UTF-8 decode to U+FFFD,
  // as HF's ByteLevel decoder does. Unknown ids throw aspen::Error.
  std::string decode(const std::vector<TokenId>& ids, bool skip_special_tokens = false) const;

  // Number of ids including added tokens (max id + 1).
  int64_t vocab_size() const;
  std::optional<TokenId> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(TokenId id) const;
  bool is_special(TokenId id) const;
  // Added tokens, in id order (content, id, special flag).
  struct AddedToken {
    std::string content;
    TokenId id;
    bool special;
  };
  const std::vector<AddedToken>& added_tokens() const;

  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  // from_json on the parsed document; may let nlohmann::json::exception escape.
  static Tokenizer from_spec(const nlohmann::json& spec, const std::string& source);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace aspen::tokenizer
