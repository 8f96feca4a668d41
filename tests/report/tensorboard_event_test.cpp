// The bytes of TensorBoard event files: CRC32C against published check values, the
// TFRecord framing, and Event protobufs checked by hand field by field (the same
// bytes Python's protobuf library writes for these messages).
#include "aspen/report/tensorboard_event.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "aspen/util/crc32c.h"

namespace aspen::report {
namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out.push_back(static_cast<char>(v));
  return out;
}

uint64_t little_endian_at(const std::string& data, size_t offset, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i) {
    value |= uint64_t{static_cast<uint8_t>(data[offset + i])} << (8 * i);
  }
  return value;
}

TEST(Crc32c, MatchesPublishedCheckValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the CRC catalogue's check value
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, of 0xFF.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xFF')), 0x62A8AB43u);
}

TEST(Crc32c, MaskRotatesRightBy15AndAddsTheOffset) {
  const uint32_t crc = 0xE3069283u;
  const uint32_t expected = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
  EXPECT_EQ(masked_crc32c("123456789"), expected);
  EXPECT_NE(masked_crc32c("123456789"), crc);
}

TEST(TfRecord, FramesLengthAndDataEachWithItsMaskedCrc) {
  const std::string data = "abc";
  const std::string record = tfrecord(data);
  ASSERT_EQ(record.size(), 8u + 4u + data.size() + 4u);
  EXPECT_EQ(record.substr(0, 8), bytes({3, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(little_endian_at(record, 8, 4), masked_crc32c(record.substr(0, 8)));
  EXPECT_EQ(record.substr(12, 3), "abc");
  EXPECT_EQ(little_endian_at(record, 15, 4), masked_crc32c("abc"));
}

TEST(TfRecord, EmptyDataIsAValidRecord) {
  const std::string record = tfrecord("");
  ASSERT_EQ(record.size(), 16u);
  EXPECT_EQ(little_endian_at(record, 0, 8), 0u);
  EXPECT_EQ(little_endian_at(record, 12, 4), masked_crc32c(""));
}

TEST(TensorBoardEvent, ScalarEventBytesAreTheHandEncodedProtobuf) {
  const std::string expected =
      bytes({0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f})  // wall_time (1, fixed64): 1.5
      + bytes({0x10, 0x03})                        // step (2, varint): 3
      + bytes({0x2a, 0x0a})                        // summary (5, bytes): 10 bytes
      + bytes({0x0a, 0x08})                        //   value (1, bytes): 8 bytes
      + bytes({0x0a, 0x01, 'a'})                   //     tag (1, bytes): "a"
      + bytes({0x15, 0, 0, 0x80, 0x3e});           //     simple_value (2, fixed32): 0.25f
  EXPECT_EQ(scalars_event(1.5, 3, {{"a", 0.25}}), expected);
}

TEST(TensorBoardEvent, SeveralScalarsShareOneSummaryAndLargeStepsTakeLongVarints) {
  const std::string event = scalars_event(0.0, 300, {{"x", 1.0}, {"y/z", -2.0}});
  const std::string expected = bytes({0x10, 0xac, 0x02})  // step 300 = 0b10_0101100
                               + bytes({0x2a, 0x16})      // summary: 22 bytes
                               + bytes({0x0a, 0x08, 0x0a, 0x01, 'x', 0x15, 0, 0, 0x80, 0x3f}) +
                               bytes({0x0a, 0x0a, 0x0a, 0x03, 'y', '/', 'z', 0x15, 0, 0, 0, 0xc0});
  EXPECT_EQ(event, expected);  // wall_time 0 is proto3's default: left out
}

TEST(TensorBoardEvent, FirstEventCarriesTheFileVersion) {
  const std::string expected = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f}) + bytes({0x1a, 0x0d}) +
                               "brain.Event:2";  // file_version (3)
  EXPECT_EQ(file_version_event(1.5), expected);
}

TEST(TensorBoardEvent, SessionStartCarriesStatusStartAtItsStep) {
  const std::string expected = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f}) + bytes({0x10, 0x03}) +
                               bytes({0x3a, 0x02, 0x08, 0x01});  // session_log (7): status 1
  EXPECT_EQ(session_start_event(1.5, 3), expected);
}

}  // namespace
}  // namespace aspen::report
