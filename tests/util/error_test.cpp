#include "aspen/util/error.h"

#include <gtest/gtest.h>

#include "aspen/util/file.h"

namespace aspen {
namespace {

TEST(Error, MessageNamesInputProblemAndHint) {
  Error error("bad dtype \"F99\"", "model.safetensors: tensor w", "use one of F32, BF16");
  EXPECT_STREQ(error.what(), "model.safetensors: tensor w: bad dtype \"F99\" (hint: use one of F32, BF16)");
  EXPECT_EQ(error.input(), "model.safetensors: tensor w");
}

TEST(Error, MessageWithoutInputIsJustTheProblem) {
  EXPECT_STREQ(Error("out of blocks").what(), "out of blocks");
}

TEST(File, MissingFileErrorNamesPath) {
  try {
    read_file("/nonexistent/aspen/file.bin");
    FAIL() << "expected aspen::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.input(), "/nonexistent/aspen/file.bin");
  }
}

TEST(File, AtomicWriteRoundTrips) {
  const std::string path = ::testing::TempDir() + "/aspen_file_roundtrip.bin";
  const std::string bytes("a\0b\xff", 4);
  write_file_atomic(path, bytes);
  EXPECT_EQ(read_file(path), bytes);
}

}  // namespace
}  // namespace aspen
