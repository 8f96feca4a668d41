// BpeModel: the `model` section of tokenizer.json for byte-level BPE — vocabulary,
// merge ranks, and the merge loop that turns one pre-token into ids.
// The model works on raw bytes: each byte starts as the vocabulary entry of its
// ByteLevel character, then the adjacent pair with the lowest merge rank (leftmost
// on ties) is merged until no ranked pair is left — the order HF's BPE applies.
// Bytes whose character is not in the vocabulary become `unk_token` (fused when
// fuse_unk) or, without one, are dropped, as in HF.
// Contract: rejects (aspen::Error) dropout, byte_fallback, continuing-subword prefixes
// and end-of-word suffixes, merges naming tokens that are not in the vocabulary.
// Thread safety: immutable after construction except the internal word cache, which
// is itself thread-safe; all const methods may run concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/tokenizer.h"
#include "aspen/tokenizer/word_cache.h"

namespace aspen::tokenizer {

class BpeModel {
 public:
  static BpeModel from_json(const nlohmann::json& spec, const std::string& source);

  // Appends the ids of pre-token `word` (raw bytes) to `out`.
  void encode_word(std::string_view word, std::vector<TokenId>& out) const;

  std::optional<TokenId> token_to_id(std::string_view token) const;
  // The vocabulary entry of `id` (ByteLevel text), or nullptr when `id` has none.
  const std::string* id_to_token(TokenId id) const;
  // Number of vocabulary entries (HF's get_vocab_size).
  size_t vocab_count() const { return vocab_.size(); }
  // One past the largest id in the vocabulary.
  TokenId id_limit() const { return static_cast<TokenId>(tokens_.size()); }

 private:
  struct Merge {
    int32_t rank;
    TokenId result;
  };
  static uint64_t pair_key(TokenId left, TokenId right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  void merge_word(std::string_view word, std::vector<TokenId>& out) const;

  std::unordered_map<std::string, TokenId> vocab_;
  std::vector<std::string> tokens_;             // (id_limit) ; "" where no entry
  std::vector<bool> has_token_;                 // (id_limit)
  std::unordered_map<uint64_t, Merge> merges_;  // (left, right) -> rank, result
  std::array<TokenId, 256> byte_ids_{};         // byte -> id of its character, or -1
  std::optional<TokenId> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  // Heap-allocated so BpeModel stays movable (the cache holds mutexes).
  std::unique_ptr<WordCache> cache_ = std::make_unique<WordCache>();
};

}  // namespace aspen::tokenizer
