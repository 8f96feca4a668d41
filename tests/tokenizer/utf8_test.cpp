// UTF-8 validation and lossy repair. Oracle for the repair: the Unicode Standard's
// "maximal subpart" practice (ch. 3, U+FFFD substitution), which Rust's
// String::from_utf8_lossy implements; the first case is the standard's own example.
#include "aspen/tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace aspen::tokenizer {
namespace {

std::string lossy(std::string_view bytes) {
  std::string out;
  utf8::append_lossy(bytes, out);
  return out;
}

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Lossy, UnicodeStandardExampleOfMaximalSubparts) {
  // 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a FFFD FFFD FFFD b FFFD c FFFD FFFD d
  const std::string bytes = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  EXPECT_EQ(lossy(bytes), "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
}

TEST(Utf8Lossy, OverlongsSurrogatesAndOutOfRangeAreOneReplacementPerByte) {
  EXPECT_EQ(lossy("\xC0\xAF"), kFffd + kFffd);                          // overlong '/'
  EXPECT_EQ(lossy("\xE0\x80\xAF"), kFffd + kFffd + kFffd);              // E0 needs A0..BF next
  EXPECT_EQ(lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // surrogate U+D800
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(lossy("\xFF"), kFffd);
}

TEST(Utf8Lossy, TruncatedSequenceIsOneReplacement) {
  EXPECT_EQ(lossy("\xF0\x9F\x98"), kFffd);     // first 3 bytes of U+1F600
  EXPECT_EQ(lossy("x\xE4\xB8"), "x" + kFffd);  // first 2 bytes of U+4E2D
  EXPECT_EQ(lossy("\xE4\xB8\xAD"), "\xE4\xB8\xAD");
}

TEST(Utf8Validation, FindsFirstIllFormedByte) {
  EXPECT_EQ(utf8::find_invalid("plain ascii"), utf8::kAllValid);
  EXPECT_EQ(utf8::find_invalid("caf\xC3\xA9 \xF0\x9F\x98\x80"), utf8::kAllValid);
  EXPECT_EQ(utf8::find_invalid("ab\xC3"), 2u);                         // truncated at the end
  EXPECT_EQ(utf8::find_invalid("ab\x80"), 2u);                         // lone continuation
  EXPECT_EQ(utf8::find_invalid("a\xED\xA0\x80"), 1u);                  // surrogate
  EXPECT_EQ(utf8::find_invalid("a\xC1\xBF"), 1u);                      // overlong
  EXPECT_EQ(utf8::find_invalid("\xF4\x8F\xBF\xBF"), utf8::kAllValid);  // U+10FFFF
  EXPECT_EQ(utf8::find_invalid(std::string("a\0b", 3)), utf8::kAllValid);
}

TEST(Utf8Codec, EncodeDecodeRoundTripAtBoundaries) {
  for (char32_t cp : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    std::string text;
    utf8::append_code_point(cp, text);
    char32_t decoded = 0;
    EXPECT_EQ(static_cast<size_t>(utf8::decode_at(text, 0, &decoded)), text.size());
    EXPECT_EQ(decoded, cp);
    EXPECT_EQ(utf8::find_invalid(text), utf8::kAllValid);
  }
}

}  // namespace
}  // namespace aspen::tokenizer
