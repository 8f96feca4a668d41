#include "aspen/tokenizer/bpe_trainer.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "aspen/tokenizer/byte_level.h"
#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/normalizer.h"
#include "aspen/tokenizer/utf8.h"
#include "aspen/util/error.h"
#include "aspen/util/strings.h"

namespace aspen::tokenizer {
namespace {

// The Split pattern of Qwen2/2.5/3 tokenizer.json (identical in all three).
constexpr const char* kQwenSplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

constexpr int kByteAlphabetSize = 256;

nlohmann::ordered_json byte_level_step() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", false},
          {"use_regex", false}};
}

// The pre_tokenizer section written to tokenizer.json; the trainer splits its corpus with
// a PreTokenizer built from this same value, so training and encoding cannot disagree.
nlohmann::ordered_json pre_tokenizer_spec() {
  const nlohmann::ordered_json split = {{"type", "Split"},
                                        {"pattern", {{"Regex", kQwenSplitRegex}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}};
  return {{"type", "Sequence"},
          {"pretokenizers", nlohmann::ordered_json::array({split, byte_level_step()})}};
}

// A pair of token ids packed so that integer order equals (left, right) lexicographic order.
using PairKey = uint64_t;
PairKey pair_key(uint32_t left, uint32_t right) {
  return (uint64_t{left} << 32) | right;
}
uint32_t pair_left(PairKey key) {
  return static_cast<uint32_t>(key >> 32);
}
uint32_t pair_right(PairKey key) {
  return static_cast<uint32_t>(key & 0xFFFFFFFFu);
}

// One queue entry: a pair, the count it had when pushed, and the words to merge it in.
// As in HF, an entry only covers the words recorded when it was pushed.
struct QueuedPair {
  PairKey pair;
  int64_t count;
  std::vector<uint32_t> words;  // sorted word indices
};

// Heap order: higher count first; on equal counts the smaller pair first.
bool lower_priority(const QueuedPair& a, const QueuedPair& b) {
  if (a.count != b.count) return a.count < b.count;
  return a.pair > b.pair;
}

struct PairChange {
  PairKey pair;
  int delta;
};

// Replaces every non-overlapping (left, right), scanning left to right, by `merged` and
// reports how the neighbouring pairs' counts change (HF's Word::merge).
void merge_in_word(std::vector<uint32_t>& symbols, uint32_t left, uint32_t right, uint32_t merged,
                   std::vector<PairChange>& changes) {
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (symbols[i] != left || symbols[i + 1] != right) continue;
    if (i > 0) {
      changes.push_back({pair_key(symbols[i - 1], left), -1});
      changes.push_back({pair_key(symbols[i - 1], merged), +1});
    }
    symbols[i] = merged;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    if (i + 1 < symbols.size()) {
      changes.push_back({pair_key(right, symbols[i + 1]), -1});
      changes.push_back({pair_key(merged, symbols[i + 1]), +1});
    }
  }
}

struct TrainedModel {
  std::vector<std::string> vocab;                     // id -> token
  std::vector<std::pair<uint32_t, uint32_t>> merges;  // in rank order
};

TrainedModel run_bpe(const std::unordered_map<std::string, uint64_t>& word_counts,
                     const BpeTrainerOptions& options) {
  TrainedModel model;
  std::unordered_map<std::string, uint32_t> token_to_id;
  auto add_token = [&](const std::string& token) {
    const auto [it, inserted] =
        token_to_id.emplace(token, static_cast<uint32_t>(model.vocab.size()));
    if (inserted) model.vocab.push_back(token);
    return it->second;
  };
  for (const std::string& special : options.special_tokens) add_token(special);

  // Alphabet: the 256 byte-level characters (every word is made of them) by code point.
  std::array<uint8_t, kByteAlphabetSize> bytes_by_char;
  for (int b = 0; b < kByteAlphabetSize; ++b) bytes_by_char[b] = static_cast<uint8_t>(b);
  std::sort(bytes_by_char.begin(), bytes_by_char.end(),
            [](uint8_t a, uint8_t b) { return byte_level::char_of(a) < byte_level::char_of(b); });
  std::array<uint32_t, kByteAlphabetSize> id_of_byte;
  for (const uint8_t b : bytes_by_char) id_of_byte[b] = add_token(byte_level::text_of(b));

  // Words in sorted order so the run does not depend on hash order (HF's result does not
  // either: each word merges independently and counts are sums).
  std::vector<const std::pair<const std::string, uint64_t>*> sorted_words;
  sorted_words.reserve(word_counts.size());
  for (const auto& entry : word_counts) sorted_words.push_back(&entry);
  std::sort(sorted_words.begin(), sorted_words.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  std::vector<std::vector<uint32_t>> words;
  std::vector<int64_t> counts;
  words.reserve(sorted_words.size());
  for (const auto* entry : sorted_words) {
    std::vector<uint32_t> symbols;
    for (const char byte : entry->first) symbols.push_back(id_of_byte[static_cast<uint8_t>(byte)]);
    words.push_back(std::move(symbols));
    counts.push_back(static_cast<int64_t>(entry->second));
  }

  std::unordered_map<PairKey, int64_t> pair_counts;
  std::unordered_map<PairKey, std::vector<uint32_t>> where;
  for (uint32_t w = 0; w < words.size(); ++w) {
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const PairKey key = pair_key(words[w][i], words[w][i + 1]);
      pair_counts[key] += counts[w];
      auto& positions = where[key];
      if (positions.empty() || positions.back() != w) positions.push_back(w);
    }
  }
  std::vector<QueuedPair> queue;
  auto push_where = [&]() {
    for (auto& [key, positions] : where) {
      const int64_t count = pair_counts[key];
      if (count <= 0) continue;
      std::sort(positions.begin(), positions.end());
      positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
      queue.push_back({key, count, std::move(positions)});
      std::push_heap(queue.begin(), queue.end(), lower_priority);
    }
    where.clear();
  };
  push_where();

  std::vector<std::pair<PairKey, uint32_t>> merges;  // (pair, merged id), duplicates kept
  std::vector<PairChange> changes;
  while (static_cast<int64_t>(model.vocab.size()) < options.vocab_size && !queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), lower_priority);
    QueuedPair top = std::move(queue.back());
    queue.pop_back();
    const int64_t current = pair_counts[top.pair];
    if (top.count != current) {  // stale: re-queue with the current count
      top.count = current;
      queue.push_back(std::move(top));
      std::push_heap(queue.begin(), queue.end(), lower_priority);
      continue;
    }
    if (top.count < 1 || static_cast<uint64_t>(top.count) < options.min_frequency) break;

    const uint32_t left = pair_left(top.pair);
    const uint32_t right = pair_right(top.pair);
    const uint32_t merged = add_token(model.vocab[left] + model.vocab[right]);
    merges.emplace_back(top.pair, merged);

    for (const uint32_t w : top.words) {
      changes.clear();
      merge_in_word(words[w], left, right, merged, changes);
      for (const PairChange& change : changes) {
        pair_counts[change.pair] += change.delta * counts[w];
        if (change.delta > 0) where[change.pair].push_back(w);
      }
    }
    push_where();
  }

  // HF keeps merges in a map from pair to rank, so a pair recorded twice keeps its later rank.
  std::unordered_map<PairKey, size_t> last_rank;
  for (size_t rank = 0; rank < merges.size(); ++rank) last_rank[merges[rank].first] = rank;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    if (last_rank[merges[rank].first] != rank) continue;
    model.merges.emplace_back(pair_left(merges[rank].first), pair_right(merges[rank].first));
  }
  return model;
}

std::string to_tokenizer_json(const TrainedModel& model, const BpeTrainerOptions& options) {
  using nlohmann::ordered_json;
  ordered_json added = ordered_json::array();
  std::set<std::string> written;
  for (const std::string& special : options.special_tokens) {
    if (!written.insert(special).second) continue;  // duplicate special token
    const auto id =
        std::find(model.vocab.begin(), model.vocab.end(), special) - model.vocab.begin();
    added.push_back({{"id", id},
                     {"content", special},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < model.vocab.size(); ++id) vocab[model.vocab[id]] = id;
  ordered_json merges = ordered_json::array();
  for (const auto& [left, right] : model.merges) {
    merges.push_back(ordered_json::array({model.vocab[left], model.vocab[right]}));
  }
  ordered_json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  root["added_tokens"] = std::move(added);
  root["normalizer"] = {{"type", "NFC"}};
  root["pre_tokenizer"] = pre_tokenizer_spec();
  root["post_processor"] = byte_level_step();
  root["decoder"] = byte_level_step();
  root["model"] = {{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", nullptr},
                   {"continuing_subword_prefix", ""},
                   {"end_of_word_suffix", ""},
                   {"fuse_unk", false},
                   {"byte_fallback", false},
                   {"ignore_merges", false},
                   {"vocab", std::move(vocab)},
                   {"merges", std::move(merges)}};
  return root.dump(2) + "\n";
}

std::string strip_line_ending(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace

BpeTrainer::BpeTrainer(BpeTrainerOptions options)
    : options_(std::move(options)),
      pre_tokenizer_(PreTokenizer::from_json(nlohmann::json(pre_tokenizer_spec()),
                                             "BPE trainer pre-tokenizer")) {
  std::set<std::string> distinct;
  for (const std::string& special : options_.special_tokens) {
    check_input(!special.empty(), "a special token is empty", "BPE trainer special tokens");
    check_input(utf8::find_invalid(special) == utf8::kAllValid, "special token is not valid UTF-8",
                "BPE trainer special tokens");
    distinct.insert(special);
  }
  const int64_t minimum = kByteAlphabetSize + static_cast<int64_t>(distinct.size());
  if (options_.vocab_size < minimum) {
    throw Error("vocab size " + std::to_string(options_.vocab_size) + " is smaller than " +
                    std::to_string(minimum) + " (256 byte-level characters + " +
                    std::to_string(distinct.size()) + " special tokens)",
                "BPE trainer vocab_size",
                "use a vocab size of at least " + std::to_string(minimum));
  }
}

void BpeTrainer::feed(std::string_view document, const std::string& source) {
  if (utf8::find_invalid(document) != utf8::kAllValid) {
    throw Error("text is not valid UTF-8", source);
  }
  const std::string normalized = to_nfc(document);
  pre_tokenizer_.split(normalized,
                       [&](std::string_view piece) { ++word_counts_[std::string(piece)]; });
}

int64_t BpeTrainer::feed_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open corpus file", path, "check the path and permissions");
  const bool jsonl = ends_with(path, ".jsonl");
  int64_t documents = 0;
  int64_t line_number = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++line_number;
    line = strip_line_ending(std::move(line));
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(line_number);
    if (!jsonl) {
      feed(line, where);
      ++documents;
      continue;
    }
    nlohmann::json value;
    try {
      value = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(std::string("invalid JSON: ") + e.what(), where);
    }
    if (value.is_object() && value.contains("text")) value = value["text"];
    if (!value.is_string()) {
      throw Error("JSONL line is neither a string nor an object with a string \"text\" field",
                  where);
    }
    feed(value.get_ref<const std::string&>(), where);
    ++documents;
  }
  if (in.bad()) throw Error("read error", path);
  return documents;
}

std::string BpeTrainer::train() const {
  return to_tokenizer_json(run_bpe(word_counts_, options_), options_);
}

std::string train_bpe_tokenizer(const std::vector<std::string>& documents,
                                const BpeTrainerOptions& options) {
  BpeTrainer trainer(options);
  for (size_t i = 0; i < documents.size(); ++i) {
    trainer.feed(documents[i], "document " + std::to_string(i));
  }
  return trainer.train();
}

}  // namespace aspen::tokenizer
