// BpeTrainer: trains a byte-level BPE tokenizer the way HF tokenizers' BpeTrainer does
// and writes it as an HF `tokenizer.json` with Qwen's pipeline (NFC normaliser, Split on
// the Qwen regex + ByteLevel pre-tokenizer, ByteLevel decoder and post-processor).
//
// Algorithm (HF models/bpe/trainer.rs, reproduced merge for merge):
//   1. feed(): NFC-normalise each document, split it with the Qwen regex (the same
//      PreTokenizer the Tokenizer builds from the written JSON) and count the pieces
//      ("words"); each byte of a word is one byte-level character.
//   2. Vocabulary starts with the special tokens (ids 0..k-1, as HF does), then the 256
//      byte-level characters sorted by code point.
//   3. Repeatedly merge the pair with the highest count, ties going to the smaller
//      (left id, right id), until the vocabulary has `vocab_size` entries or no pair is left.
//      HF's lazy priority queue is reproduced exactly (should one token string ever be built
//      from two different pairs, both merges are recorded and the later rank wins, as in
//      HF), so the merges list equals what HF writes for the same corpus; a test pins that.
// Special tokens are written as added tokens (special=true, normalized=false); text that
// spells a special token inside the corpus is counted as ordinary text, as in HF training.
//
// Thread safety: a BpeTrainer is not synchronised; feed it from one thread. train() is
// const and may run concurrently with other const calls.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/pre_tokenizer.h"

namespace aspen::tokenizer {

struct BpeTrainerOptions {
  // Final vocabulary size including special tokens and the 256-character byte alphabet.
  int64_t vocab_size = 0;
  // Added as special tokens, in this order; duplicates are ignored.
  std::vector<std::string> special_tokens;
  // Pairs seen fewer times than this are never merged (HF's min_frequency).
  uint64_t min_frequency = 0;
};

class BpeTrainer {
 public:
  // Throws aspen::Error if vocab_size < 256 + number of distinct special tokens, or a
  // special token is empty or not valid UTF-8.
  explicit BpeTrainer(BpeTrainerOptions options);

  // Counts the pre-tokens of one document. Throws aspen::Error on invalid UTF-8, naming
  // `source` (e.g. "corpus.txt:12").
  void feed(std::string_view document, const std::string& source = "document");
  // Feeds every document of a corpus file: `.jsonl` files hold one JSON string or object
  // with a string "text" field per line; any other file is plain text, one document per
  // line (line ending excluded). Empty lines are skipped. Errors name file and line.
  // Returns the number of documents fed.
  int64_t feed_file(const std::string& path);

  // Number of distinct pre-tokens counted so far.
  int64_t num_words() const { return static_cast<int64_t>(word_counts_.size()); }

  // Runs the merges and returns the tokenizer.json text. May be called more than once.
  std::string train() const;

 private:
  BpeTrainerOptions options_;
  PreTokenizer pre_tokenizer_;  // built from the pre_tokenizer section train() writes
  // Raw bytes of each pre-token -> count; bytes become byte-level characters in train().
  std::unordered_map<std::string, uint64_t> word_counts_;
};

// Trains on in-memory documents and returns the tokenizer.json text (for demos and tests).
std::string train_bpe_tokenizer(const std::vector<std::string>& documents,
                                const BpeTrainerOptions& options);

}  // namespace aspen::tokenizer
