// ByteLevel byte <-> character table, checked against entries of GPT-2's
// bytes_to_unicode that every byte-level vocabulary relies on.
#include "aspen/tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include <set>

namespace aspen::tokenizer {
namespace {

TEST(ByteLevel, KnownEntriesOfTheGpt2Table) {
  EXPECT_EQ(byte_level::char_of(' '), U'\u0120');   // "Ġ"
  EXPECT_EQ(byte_level::char_of('\n'), U'\u010A');  // "Ċ"
  EXPECT_EQ(byte_level::char_of('\t'), U'\u0109');  // "ĉ"
  EXPECT_EQ(byte_level::char_of(0x00), U'\u0100');
  EXPECT_EQ(byte_level::char_of(0x7F), U'\u0121');
  EXPECT_EQ(byte_level::char_of(0xAD), U'\u0143');  // the last unprintable byte
  EXPECT_EQ(byte_level::char_of('!'), U'!');
  EXPECT_EQ(byte_level::char_of(0xE9), U'\u00E9');
  EXPECT_EQ(byte_level::text_of(' '), "\xC4\xA0");
}

TEST(ByteLevel, IsABijectionOnto256CodePoints) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = byte_level::char_of(static_cast<uint8_t>(b));
    seen.insert(cp);
    ASSERT_EQ(byte_level::byte_of(cp), std::optional<uint8_t>(static_cast<uint8_t>(b)));
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_FALSE(byte_level::byte_of(U' ').has_value());
  EXPECT_FALSE(byte_level::byte_of(U'\u4E2D').has_value());
}

TEST(ByteLevel, EncodeDecodeRoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(byte_level::decode(byte_level::encode(all)), all);
  EXPECT_EQ(byte_level::encode("hi there\n"), "hi\xC4\xA0there\xC4\x8A");
  EXPECT_FALSE(byte_level::decode("has space").has_value());
}

}  // namespace
}  // namespace aspen::tokenizer
