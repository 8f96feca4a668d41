#include "aspen/tokenizer/added_vocabulary.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/unicode_class.h"
#include "aspen/tokenizer/utf8.h"
#include "aspen/util/error.h"

namespace aspen::tokenizer {
namespace {

bool starts_with_word(std::string_view text) {
  if (text.empty()) return false;
  char32_t cp = 0;
  utf8::decode_at(text, 0, &cp);
  return unicode_class::is_word(cp);
}

bool ends_with_word(std::string_view text) {
  if (text.empty()) return false;
  char32_t cp = 0;
  utf8::decode_at(text, utf8::previous_start(text, text.size()), &cp);
  return unicode_class::is_word(cp);
}

// Start of the whitespace run that ends `text` (text.size() when there is none).
size_t trailing_space_start(std::string_view text) {
  size_t pos = text.size();
  while (pos > 0) {
    const size_t prev = utf8::previous_start(text, pos);
    char32_t cp = 0;
    utf8::decode_at(text, prev, &cp);
    if (!unicode_class::is_white_space(cp)) break;
    pos = prev;
  }
  return pos;
}

// Length of the whitespace run that starts `text`.
size_t leading_space_length(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp = 0;
    const int len = utf8::decode_at(text, pos, &cp);
    if (!unicode_class::is_white_space(cp)) break;
    pos += len;
  }
  return pos;
}

}  // namespace

AddedVocabulary AddedVocabulary::from_json(const nlohmann::json& spec, const Normalizer& normalizer,
                                           const BpeModel& model, const std::string& source) {
  AddedVocabulary vocab;
  // The id HF's AddedVocabulary::add_tokens gives each token, in file order.
  std::unordered_map<std::string, TokenId> assigned;
  int64_t max_assigned = -1;
  auto hf_id = [&](const std::string& content) -> int64_t {
    if (const auto it = assigned.find(content); it != assigned.end()) return it->second;
    int64_t id = 0;
    if (const auto model_id = model.token_to_id(content)) {
      id = *model_id;
    } else {
      const int64_t count = static_cast<int64_t>(model.vocab_count());
      const bool past_vocab = max_assigned >= count || count == 0;
      id = max_assigned >= 0 && past_vocab ? max_assigned + 1 : count;
    }
    assigned.emplace(content, static_cast<TokenId>(id));
    max_assigned = std::max(max_assigned, id);
    return id;
  };
  if (spec.is_null()) return vocab;
  if (!spec.is_array()) throw Error("added_tokens is not an array", source + ": added_tokens");
  for (size_t i = 0; i < spec.size(); ++i) {
    const auto& token = spec[i];
    const std::string where = source + ": added_tokens[" + std::to_string(i) + "]";
    if (!token.is_object() || !token.contains("id") || !token["id"].is_number_integer() ||
        !token.contains("content") || !token["content"].is_string()) {
      throw Error("added token needs an integer \"id\" and a string \"content\"", where);
    }
    Entry entry{token["content"].get<std::string>(),
                static_cast<TokenId>(token["id"].get<int64_t>()),
                token.value("special", false),
                token.value("single_word", false),
                token.value("lstrip", false),
                token.value("rstrip", false),
                token.value("normalized", !token.value("special", false))};
    if (utf8::find_invalid(entry.content) != utf8::kAllValid) {
      throw Error("added token content is not valid UTF-8", where);
    }
    if (!entry.content.empty() && hf_id(entry.content) != entry.id) {
      throw Error("added token \"" + entry.content + "\" has id " + std::to_string(entry.id) +
                      " but HF tokenizers would assign it id " +
                      std::to_string(hf_id(entry.content)),
                  where, "HF numbers added tokens from the end of the model vocabulary");
    }
    vocab.entries_.push_back(std::move(entry));
  }
  std::stable_sort(vocab.entries_.begin(), vocab.entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.id < b.id; });

  for (size_t i = 0; i < vocab.entries_.size(); ++i) {
    const Entry& entry = vocab.entries_[i];
    vocab.by_id_.emplace(entry.id, i);
    vocab.by_content_.emplace(entry.content, i);
    if (entry.content.empty()) continue;  // An empty pattern would match everywhere.
    if (entry.normalized) {
      std::string scratch;
      const std::string normalized(normalizer.apply(entry.content, scratch));
      vocab.patterns_[1].push_back({normalized, i});
    } else {
      vocab.patterns_[0].push_back({entry.content, i});
    }
  }
  for (int stage = 0; stage < 2; ++stage) {
    auto& patterns = vocab.patterns_[stage];
    // Within one first byte, longest first; equal texts keep the first entry (as HF's
    // automaton reports the first pattern added).
    std::stable_sort(patterns.begin(), patterns.end(), [](const Pattern& a, const Pattern& b) {
      const auto fa = static_cast<uint8_t>(a.text[0]);
      const auto fb = static_cast<uint8_t>(b.text[0]);
      return fa != fb ? fa < fb : a.text.size() > b.text.size();
    });
    auto& ranges = vocab.first_byte_range_[stage];
    ranges.assign(256, {0, 0});
    for (size_t p = 0; p < patterns.size(); ++p) {
      auto& range = ranges[static_cast<uint8_t>(patterns[p].text[0])];
      if (range.first == range.second) range.first = p;
      range.second = p + 1;
    }
  }
  return vocab;
}

const AddedVocabulary::Entry* AddedVocabulary::find(TokenId id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &entries_[it->second];
}

const AddedVocabulary::Entry* AddedVocabulary::find(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  return it == by_content_.end() ? nullptr : &entries_[it->second];
}

bool AddedVocabulary::find_match(std::string_view text, size_t from, Stage stage, size_t* begin,
                                 size_t* end, size_t* entry) const {
  const auto& patterns = patterns_[index(stage)];
  const auto& ranges = first_byte_range_[index(stage)];
  for (size_t pos = from; pos < text.size(); ++pos) {
    const auto [first, last] = ranges[static_cast<uint8_t>(text[pos])];
    for (size_t p = first; p < last; ++p) {
      const std::string& pattern = patterns[p].text;
      if (text.compare(pos, pattern.size(), pattern) == 0) {
        *begin = pos;
        *end = pos + pattern.size();
        *entry = patterns[p].entry;
        return true;
      }
    }
  }
  return false;
}

void AddedVocabulary::split(std::string_view text, Stage stage, std::vector<Piece>& out) const {
  out.clear();
  size_t done = 0;  // End of the last piece emitted.
  size_t search_from = 0;
  size_t begin = 0;
  size_t end = 0;
  size_t entry_index = 0;
  while (find_match(text, search_from, stage, &begin, &end, &entry_index)) {
    // The automaton resumes after the raw match, whatever stripping does below.
    search_from = end;
    const Entry& entry = entries_[entry_index];
    if (entry.single_word) {
      const bool space_before = begin == 0 || !ends_with_word(text.substr(0, begin));
      const bool space_after = end == text.size() || !starts_with_word(text.substr(end));
      if (!space_before || !space_after) continue;
    }
    if (entry.lstrip) begin = std::max(trailing_space_start(text.substr(0, begin)), done);
    if (entry.rstrip) end += leading_space_length(text.substr(end));
    if (done < begin) out.push_back({done, begin, Piece::kText});
    out.push_back({begin, end, entry.id});
    done = end;
  }
  if (done < text.size()) out.push_back({done, text.size(), Piece::kText});
}

}  // namespace aspen::tokenizer
