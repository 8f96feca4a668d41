// AddedVocabulary: the `added_tokens` of tokenizer.json and the way HF finds them in
// text before any other processing.
// Matching follows HF's added_vocabulary.rs: tokens with normalized=false are found in
// the raw text; tokens with normalized=true are found, by their normalised content,
// in the normalised text between those. Among matches the leftmost wins, then the
// longest (aho-corasick leftmost-longest), scanning on after each match. A match of a
// single_word token is discarded when a word character (Rust regex \w) touches it; an
// lstrip/rstrip token also swallows the whitespace (\s) to its left/right.
// Thread safety: immutable after construction; const methods are safe concurrently.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "aspen/tokenizer/bpe_model.h"
#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/normalizer.h"
#include "aspen/tokenizer/tokenizer.h"

namespace aspen::tokenizer {

class AddedVocabulary {
 public:
  struct Entry {
    std::string content;
    TokenId id;
    bool special;
    bool single_word;
    bool lstrip;
    bool rstrip;
    bool normalized;
  };
  // One piece of a split: [begin, end) of the text, and the id of the added token it
  // is, or kText for text still to be tokenized.
  struct Piece {
    static constexpr TokenId kText = -1;
    size_t begin;
    size_t end;
    TokenId id;
  };
  enum class Stage { kRaw, kNormalized };

  // Parses `added_tokens`; patterns of normalized tokens are normalised by `normalizer`.
  // HF ignores the ids written in the file and re-assigns them (the model's id when the
  // content is in its vocabulary, else the next free id past it); a file whose ids
  // differ from those is rejected, since following either would surprise someone.
  static AddedVocabulary from_json(const nlohmann::json& spec, const Normalizer& normalizer,
                                   const BpeModel& model, const std::string& source);

  // Splits `text` by the tokens matched at `stage`; the pieces cover the text in order
  // (HF quirk kept: an rstrip token may overlap the next match). `out` is overwritten.
  void split(std::string_view text, Stage stage, std::vector<Piece>& out) const;
  bool has_patterns(Stage stage) const { return !patterns_[index(stage)].empty(); }

  const std::vector<Entry>& entries() const { return entries_; }  // in id order
  const Entry* find(TokenId id) const;
  const Entry* find(std::string_view content) const;

 private:
  // A pattern to look for, and the entry it stands for.
  struct Pattern {
    std::string text;
    size_t entry;
  };
  static size_t index(Stage stage) { return stage == Stage::kRaw ? 0 : 1; }
  // Leftmost-longest match at or after `from`; false when there is none.
  bool find_match(std::string_view text, size_t from, Stage stage, size_t* begin, size_t* end,
                  size_t* entry) const;

  std::vector<Entry> entries_;
  std::unordered_map<TokenId, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  // Per stage: patterns grouped by first byte, longest first within a group, so the
  // first pattern that matches at a position is the longest one there.
  std::vector<Pattern> patterns_[2];
  std::vector<std::pair<size_t, size_t>> first_byte_range_[2];  // (256) [begin, end)
};

}  // namespace aspen::tokenizer
