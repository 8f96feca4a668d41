// Encode/decode on a hand-written tokenizer.json (data/tiny_tokenizer.json): 15 vocab
// entries, 4 merges, GPT-2 pre-split, NFC, and added tokens exercising every flag.
// BPE expectations are worked by hand (shown per case); every expectation was also
// confirmed with HF tokenizers (tools/python/tokenizer_oracle.py encode|decode).
#include <gtest/gtest.h>

#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/error.h"

namespace aspen::tokenizer {
namespace {

using Ids = std::vector<TokenId>;

// vocab: a0 b1 c2 Ġ3 ab4 abc5 Ġa6 bc7 x8 .9 _10 Ã11 ©12 Â13 ł14
// merges by rank: (a,b) (ab,c) (Ġ,a) (b,c)
// added: <s>15 special, [L]16 lstrip, [R]17 rstrip, cab18 single_word,
//        é19 normalized, <s>x20 special
const Tokenizer& tiny() {
  static const Tokenizer tokenizer =
      Tokenizer::from_file(ASPEN_SOURCE_DIR "/tests/tokenizer/data/tiny_tokenizer.json");
  return tokenizer;
}

TEST(TinyBpe, MergesLowestRankFirst) {
  // "abc" -> a b c -> ab c (rank 0) -> abc (rank 1).
  // " abcbc" -> Ġ a b c b c: ab (0) beats Ġa (2) -> Ġ ab c b c -> Ġ abc b c -> Ġ abc bc.
  EXPECT_EQ(tiny().encode("abc abcbc"), (Ids{5, 3, 5, 7}));
  // 'd' has no vocabulary entry and no unk_token: HF drops it. " ab" -> Ġ ab.
  EXPECT_EQ(tiny().encode("abcd ab"), (Ids{5, 3, 4}));
  EXPECT_EQ(tiny().encode(""), Ids{});
}

TEST(TinyAddedTokens, LeftmostLongestMatchWins) {
  EXPECT_EQ(tiny().encode("x<s>cab"), (Ids{8, 15, 18}));
  EXPECT_EQ(tiny().encode("<s>x<s>"), (Ids{20, 15}));  // "<s>x" is longer than "<s>"
}

TEST(TinyAddedTokens, SingleWordNeedsNonWordNeighbours) {
  // Matches: alone, before '.', at the end. Not next to x, _, é, a combining mark,
  // ZWJ (Join_Control), Ⓐ (Other_Alphabetic) or an Arabic-Indic digit.
  EXPECT_EQ(tiny().encode("cab cab. xcab cabx _cab cab_ cab"),
            (Ids{18, 3, 18, 9, 3, 8, 2, 4, 3, 2, 4, 8, 3, 10, 2, 4, 3, 2, 4, 10, 3, 18}));
  EXPECT_EQ(tiny().encode("\u00e9cab cab\u0301 cab\u200d cab\u24b6 \u0663cab cab!"),
            (Ids{19, 2, 4, 3, 2, 4, 3, 2, 4, 3, 2, 4, 3, 2, 4, 3, 18}));
}

TEST(TinyAddedTokens, LstripAndRstripSwallowUnicodeWhitespace) {
  EXPECT_EQ(tiny().encode("a  [L]b"), (Ids{0, 16, 1}));
  EXPECT_EQ(tiny().encode("a\u00a0 [L][L]"), (Ids{0, 16, 16}));
  EXPECT_EQ(tiny().encode("a[R]   b[R]"), (Ids{0, 17, 1, 17}));
  EXPECT_EQ(tiny().encode("[R]\u0085b"), (Ids{17, 1}));  // U+0085 is \s for Rust regex
  EXPECT_EQ(tiny().encode("<s>  [L][R]  [L]"), (Ids{15, 16, 17, 16}));
  EXPECT_EQ(tiny().encode("[R]  [L]"), (Ids{17, 16}));  // the spaces go to [R] only
}

TEST(TinyAddedTokens, NormalizedTokenMatchesAfterNfc) {
  // "e" + U+0301 becomes "é" under NFC and only then matches token 19.
  EXPECT_EQ(tiny().encode("e\u0301 and \u00e9"), (Ids{19, 6, 3, 19}));
}

TEST(TinyDecode, ByteLevelDecodeWithLossyUtf8AndSkippedSpecials) {
  EXPECT_EQ(tiny().decode({4, 5, 3, 0, 11, 12, 9}), "ababc a\u00e9.");
  EXPECT_EQ(tiny().decode({15, 4, 11, 12, 20}), "<s>ab\u00e9<s>x");
  EXPECT_EQ(tiny().decode({15, 4, 11, 12, 20}, /*skip_special_tokens=*/true), "ab\u00e9");
  EXPECT_EQ(tiny().decode({11}), "\uFFFD");                // C3 alone
  EXPECT_EQ(tiny().decode({11, 12, 11}), "\u00e9\uFFFD");  // C3 A9 C3
  EXPECT_EQ(tiny().decode({13, 14, 11}), "\u00a0\uFFFD");  // C2 A0 C3
  EXPECT_THROW(tiny().decode({21}), Error);
  EXPECT_THROW(tiny().decode({-1}), Error);
}

TEST(TinyVocabulary, LookupsCoverModelAndAddedTokens) {
  EXPECT_EQ(tiny().vocab_size(), 21);
  EXPECT_EQ(tiny().token_to_id("abc"), std::optional<TokenId>(5));
  EXPECT_EQ(tiny().token_to_id("[L]"), std::optional<TokenId>(16));
  EXPECT_EQ(tiny().token_to_id("zzz"), std::nullopt);
  EXPECT_EQ(tiny().id_to_token(6), std::optional<std::string>("\u0120a"));
  EXPECT_EQ(tiny().id_to_token(20), std::optional<std::string>("<s>x"));
  EXPECT_EQ(tiny().id_to_token(99), std::nullopt);
  EXPECT_TRUE(tiny().is_special(15));
  EXPECT_FALSE(tiny().is_special(16));
  EXPECT_FALSE(tiny().is_special(5));
  ASSERT_EQ(tiny().added_tokens().size(), 6u);
  EXPECT_EQ(tiny().added_tokens()[4].content, "\u00e9");
}

}  // namespace
}  // namespace aspen::tokenizer
