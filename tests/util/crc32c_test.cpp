// crc32c_extend (util/crc32c.h): a file checksummed in chunks (checkpoint manifests
// stream their files) gets the CRC of the whole, whatever the chunk boundaries.
#include "aspen/util/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace aspen {
namespace {

TEST(Crc32c, OfPiecesEqualsTheCrcOfTheWhole) {
  std::string bytes;
  for (int i = 0; i < 1000; ++i) bytes.push_back(static_cast<char>((i * 131 + 7) & 0xFF));
  const uint32_t whole = crc32c(bytes);
  // Odd split points cross the 8-byte words the instruction path reads.
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{13}, size_t{999}}) {
    const std::string_view view(bytes);
    EXPECT_EQ(crc32c_extend(crc32c(view.substr(0, split)), view.substr(split)), whole) << split;
  }
  uint32_t running = 0;
  for (size_t at = 0; at < bytes.size(); at += 3) {
    running = crc32c_extend(running, std::string_view(bytes).substr(at, 3));
  }
  EXPECT_EQ(running, whole);
  EXPECT_EQ(crc32c_extend(0, "123456789"), 0xE3069283u);
}

TEST(Crc32c, ChangesWithASingleFlippedBit) {
  std::string bytes(4096, 'a');
  const uint32_t before = crc32c(bytes);
  bytes[4000] ^= 0x08;
  EXPECT_NE(crc32c(bytes), before);
}

}  // namespace
}  // namespace aspen
