// RegexSplitter and the Oniguruma -> PCRE2 pattern translation. Expected pieces for
// the Qwen pattern come from HF's pre_tokenizer.pre_tokenize_str (tokenizers 0.22).
#include "aspen/tokenizer/regex_splitter.h"

#include <gtest/gtest.h>

#include "aspen/util/error.h"

namespace aspen::tokenizer {
namespace {

constexpr const char* kQwenPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::vector<std::string> pieces(const RegexSplitter& splitter, std::string_view text) {
  std::vector<std::string> out;
  splitter.split(text, [&](std::string_view piece) { out.emplace_back(piece); });
  return out;
}

TEST(RegexSplitter, QwenPatternMatchesHfPieces) {
  const RegexSplitter qwen(kQwenPattern, "test");
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces(qwen, "X'S it's"), (V{"X", "'S", " it", "'s"}));
  EXPECT_EQ(pieces(qwen, "a  b"), (V{"a", " ", " b"}));
  EXPECT_EQ(pieces(qwen, "x'\u017fy"), (V{"x", "'\u017f", "y"}));  // 'ſ folds to 's
  EXPECT_EQ(pieces(qwen, "2024"), (V{"2", "0", "2", "4"}));
  // U+0085 is whitespace for Oniguruma (and HF), U+180E is not.
  EXPECT_EQ(pieces(qwen, "a\u0085'b"), (V{"a", "\u0085", "'b"}));
  EXPECT_EQ(pieces(qwen, "a\u180e'b"), (V{"a", "\u180e'", "b"}));
  EXPECT_EQ(pieces(qwen, "a\u2028\u2028b"), (V{"a", "\u2028", "\u2028b"}));
  EXPECT_EQ(pieces(qwen, "x\r\n\r\ny"), (V{"x", "\r\n\r\n", "y"}));
}

TEST(RegexSplitter, PiecesCoverTextAndLongRunsDoNotOverflowTheJitStack) {
  const RegexSplitter qwen(kQwenPattern, "test");
  const std::string text = std::string(200000, ' ') + "x" + std::string(100000, 'a');
  std::string joined;
  for (const auto& piece : pieces(qwen, text)) joined += piece;
  EXPECT_EQ(joined, text);
}

TEST(RegexSplitter, GapsBetweenMatchesAreIsolatedPieces) {
  const RegexSplitter digits(R"(\d+)", "test");
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces(digits, "ab12cd345"), (V{"ab", "12", "cd", "345"}));
  EXPECT_EQ(pieces(digits, ""), V{});
  const RegexSplitter empty_matches("x*", "test");  // empty matches split nothing
  EXPECT_EQ(pieces(empty_matches, "abxxc"), (V{"ab", "xx", "c"}));
}

TEST(TranslateOnigPattern, MapsShorthandClassesToOnigurumaMeaning) {
  EXPECT_EQ(translate_onig_pattern(R"(\s+(?!\S))", "t"), R"(\p{White_Space}+(?!\P{White_Space}))");
  EXPECT_EQ(translate_onig_pattern(R"([^\s\p{L}])", "t"), R"([^\p{White_Space}\p{L}])");
  EXPECT_EQ(translate_onig_pattern(R"(\d\w)", "t"), R"(\p{Nd}[\p{L}\p{M}\p{Nd}\p{Pc}])");
  EXPECT_EQ(translate_onig_pattern(R"(\\s\p{N})", "t"), R"(\\s\p{N})");  // escaped backslash
  EXPECT_THROW(translate_onig_pattern(R"([\W])", "t"), Error);
  EXPECT_THROW(translate_onig_pattern(R"(\h)", "t"), Error);
}

TEST(RegexSplitter, BadPatternIsAnErrorNamingTheSource) {
  try {
    RegexSplitter("(unclosed", "tok.json: pre_tokenizer");
    FAIL() << "expected aspen::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "tok.json: pre_tokenizer");
  }
}

}  // namespace
}  // namespace aspen::tokenizer
