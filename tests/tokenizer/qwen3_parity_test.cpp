// Parity with HF tokenizers on the real Qwen3 tokenizer.json: the committed golden ids
// (tools/python/tokenizer_oracle.py over tools/tokenizer/make_corpus.py's corpus) must be
// reproduced exactly, line by line, and decode must invert encode.
#include <gtest/gtest.h>

#include "aspen/tokenizer/normalizer.h"
#include "aspen/util/error.h"
#include "qwen3_fixture.h"

namespace aspen::tokenizer {
namespace {

using testing::qwen3_tokenizer;
using testing::read_jsonl;
using testing::tokenizer_data_path;

TEST(Qwen3Parity, FixtureIsInstalled) {
  // A missing fixture must fail loudly, never skip.
  ASSERT_NO_THROW(qwen3_tokenizer())
      << "the real Qwen3 tokenizer is missing: " << testing::qwen3_tokenizer_json();
  EXPECT_EQ(qwen3_tokenizer().vocab_size(), 151669);
  EXPECT_EQ(qwen3_tokenizer().added_tokens().size(), 26u);
}

TEST(Qwen3Parity, LoadsFromTheModelDirectory) {
  const Tokenizer tokenizer = Tokenizer::from_file(testing::qwen3_tokenizer_dir());
  EXPECT_EQ(tokenizer.encode("Hello world"), qwen3_tokenizer().encode("Hello world"));
}

TEST(Qwen3Parity, CorpusIsLargeAndDiverse) {
  const auto corpus = read_jsonl(tokenizer_data_path("corpus.jsonl"));
  EXPECT_GE(corpus.size(), 2000u);
}

TEST(Qwen3Parity, EncodeMatchesHfGoldenOnCorpus) {
  const auto corpus = read_jsonl(tokenizer_data_path("corpus.jsonl"));
  const auto golden = read_jsonl(tokenizer_data_path("qwen3_golden.jsonl"));
  ASSERT_EQ(corpus.size(), golden.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string text = corpus[i].get<std::string>();
    const auto expected = golden[i].get<std::vector<TokenId>>();
    const auto ids = qwen3_tokenizer().encode(text);
    if (ids != expected && ++mismatches <= 10) {
      ADD_FAILURE() << "line " << i + 1 << ": " << nlohmann::json(text).dump() << "\n  expected "
                    << nlohmann::json(expected).dump() << "\n  got      "
                    << nlohmann::json(ids).dump();
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << corpus.size() << " lines";
}

TEST(Qwen3Parity, EncodeBatchEqualsEncode) {
  const auto corpus = read_jsonl(tokenizer_data_path("corpus.jsonl"));
  std::vector<std::string> texts;
  for (const auto& line : corpus) texts.push_back(line.get<std::string>());
  const auto batch = qwen3_tokenizer().encode_batch(texts, /*threads=*/4);
  EXPECT_EQ(qwen3_tokenizer().encode_batch(texts, /*threads=*/0), batch);
  ASSERT_EQ(batch.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_EQ(batch[i], qwen3_tokenizer().encode(texts[i])) << "line " << i + 1;
  }
}

TEST(Qwen3Parity, DecodeInvertsEncodeOnCorpus) {
  // Exact inverse up to the NFC normaliser: decomposed input comes back composed.
  size_t changed_by_nfc = 0;
  for (const auto& line : read_jsonl(tokenizer_data_path("corpus.jsonl"))) {
    const std::string text = line.get<std::string>();
    const std::string decoded = qwen3_tokenizer().decode(qwen3_tokenizer().encode(text));
    if (decoded != text) {
      ++changed_by_nfc;
      ASSERT_EQ(decoded, to_nfc(text));
    }
  }
  EXPECT_GT(changed_by_nfc, 0u);  // the corpus does contain decomposed text
}

TEST(Qwen3Parity, EncodesChatMarkupLikeHf) {
  // Oracle: HF tokenizers (tokenizer_oracle.py encode), add_special_tokens=false.
  EXPECT_EQ(qwen3_tokenizer().encode("<|im_start|>user\nhi<|im_end|>"),
            (std::vector<TokenId>{151644, 872, 198, 6023, 151645}));
  EXPECT_EQ(qwen3_tokenizer().encode("it'S OK'LL"),
            (std::vector<TokenId>{275, 13272, 10402, 6, 4086}));
  EXPECT_EQ(qwen3_tokenizer().encode("1234567"),
            (std::vector<TokenId>{16, 17, 18, 19, 20, 21, 22}));
}

TEST(Qwen3Parity, DecodeMatchesHfIncludingSplitCharacters) {
  // Oracle: HF tokenizers decode (tokenizer_oracle.py; ByteLevel decoder, from_utf8_lossy).
  struct Case {
    std::vector<TokenId> ids;
    bool skip_special;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{9284, 246}, false, "\uFFFD"},  // F0 9F 98: 3 of 4 bytes of U+1F600
      {{9284, 246, 222}, false, "\U0001F600"},
      {{3490}, false, "\uFFFD"},  // E4 B8: 2 of 3 bytes of U+4E2D
      {{3490, 255}, false, "\u4E2D"},
      {{127, 220, 3490, 9426}, false, "\uFFFD \uFFFDinitial"},
      {{224, 224, 220}, false, "\uFFFD\uFFFD "},  // two lone continuation bytes
      {{9284, 151645, 246, 222}, false, "\uFFFD<|im_end|>\uFFFD\uFFFD"},
      {{9284, 151645, 246, 222}, true, "\U0001F600"},  // skipping rejoins the bytes
      {{151644, 872, 151645, 198}, false, "<|im_start|>user<|im_end|>\n"},
      {{151644, 872, 151645, 198}, true, "user\n"},
      {{151667, 151668}, true, "<think></think>"},  // not special: kept
      {{126, 227}, false, "\u0085"},
      {{141334, 3958, 72858}, false, "\U0001F600 \u00E9 \u4E2D"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(qwen3_tokenizer().decode(c.ids, c.skip_special), c.expected)
        << nlohmann::json(c.ids).dump();
  }
  EXPECT_THROW(qwen3_tokenizer().decode({151669}), Error);
}

}  // namespace
}  // namespace aspen::tokenizer
