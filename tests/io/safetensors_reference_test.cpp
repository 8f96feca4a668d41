// Cross-check against the format's reference implementation: the `safetensors`
// package (write_safetensors_reference.py, run under the oracles' Python) writes a
// file; our reader must load exactly the values that script encodes. A missing
// Python or package fails the test: it is the parity guarantee, not an option.
#include <cstdlib>

#include "aspen/io/safetensors.h"
#include "io_test_util.h"
#include "support/oracles.h"

namespace aspen::io {
namespace {

TEST(SafetensorsReference, ReadsFileWrittenByTheSafetensorsPackage) {
  testing::TempDir dir;
  const std::string path = dir.file("reference.safetensors");
  const std::string command = testing::python() + " " + ASPEN_SOURCE_DIR +
                              "/tests/io/write_safetensors_reference.py " + path;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  const SafetensorsReader reader(path);
  EXPECT_EQ(reader.metadata(),
            (std::map<std::string, std::string>{{"format", "pt"}, {"writer", "python-reference"}}));
  ASSERT_EQ(reader.names().size(), 12u);

  auto expect_equal = [&](const std::string& name, const torch::Tensor& expected) {
    const torch::Tensor actual = reader.tensor(name);
    EXPECT_EQ(actual.scalar_type(), expected.scalar_type()) << name;
    EXPECT_TRUE(actual.sizes() == expected.sizes()) << name;
    EXPECT_TRUE(torch::equal(actual, expected)) << name << "\n" << actual << "\n" << expected;
  };
  expect_equal("f32", torch::tensor({0.5f, -1.0f, 2.0f, 3.25f, -4.5f, 1e-3f}).reshape({2, 3}));
  expect_equal("f16", torch::tensor({1.0f, -0.5f, 65504.0f}).to(torch::kHalf));
  expect_equal("bf16",
               torch::tensor({1.0f, -2.5f, 0.15625f, 256.0f}).reshape({2, 2}).to(torch::kBFloat16));
  expect_equal("f64", torch::tensor({3.141592653589793, -1e300}, torch::kDouble));
  expect_equal("i64", torch::tensor({int64_t{-9007199254740993}, int64_t{0}, int64_t{1} << 62}));
  expect_equal("i32", torch::tensor({-2147483647 - 1, 123456}, torch::kInt));
  expect_equal("i16", torch::tensor({-32768, 32767}, torch::kShort));
  expect_equal("i8", torch::tensor({-128, -1, 0, 127}, torch::kChar));
  expect_equal("u8", torch::tensor({0, 128, 255}, torch::kByte));
  expect_equal("bool", torch::tensor({true, false, false, true}).reshape({2, 2}));
  expect_equal("scalar", torch::tensor(42.0f));
  expect_equal("empty", torch::zeros({0, 4}));
}

// The package writes compact JSON with __metadata__ first; the format allows any
// JSON layout, so a header with spaces and __metadata__ last must read the same.
TEST(SafetensorsReference, ReadsSpacedHeaderWithMetadataLast) {
  testing::TempDir dir;
  const std::string path = dir.file("spaced.safetensors");
  testing::write_bytes(
      path, testing::safetensors_bytes(
                R"({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, )"
                R"("__metadata__": {"format": "pt"}})",
                std::string("\x00\x00\xc0\x3f\x00\x00\x00\xc0", 8)));  // 1.5f, -2.0f (LE)
  const SafetensorsReader reader(path);
  EXPECT_EQ(reader.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_TRUE(torch::equal(reader.tensor("x"), torch::tensor({1.5f, -2.0f})));
}

}  // namespace
}  // namespace aspen::io
