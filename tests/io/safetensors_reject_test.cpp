// Every malformed safetensors file is an aspen::Error naming the file and the
// problem: never a crash, never a read outside the file.
#include <limits>

#include "aspen/io/safetensors.h"
#include "io_test_util.h"

namespace aspen::io {
namespace {

using testing::expect_error;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::u64_le;
using testing::write_bytes;

class SafetensorsReject : public ::testing::Test {
 protected:
  // Writes `bytes` as a file and expects opening it to fail mentioning `words` and the path.
  void expect_rejected(const std::string& bytes, std::initializer_list<std::string> words) {
    const std::string path = dir_.file("bad.safetensors");
    write_bytes(path, bytes);
    expect_error([&] { SafetensorsReader reader(path); }, {path});
    expect_error([&] { SafetensorsReader reader(path); }, words);
  }
  // A file with this header JSON and `data_size` zero bytes of data.
  void expect_header_rejected(const std::string& header, size_t data_size,
                              std::initializer_list<std::string> words) {
    expect_rejected(safetensors_bytes(header, std::string(data_size, '\0')), words);
  }

  TempDir dir_;
};

TEST_F(SafetensorsReject, MissingFile) {
  expect_error([&] { SafetensorsReader reader(dir_.file("absent.safetensors")); },
               {"absent.safetensors", "cannot open"});
}

TEST_F(SafetensorsReject, FileShorterThanLengthPrefix) {
  expect_rejected("", {"shorter than the 8-byte"});
  expect_rejected(std::string("\x05\x00\x00", 3), {"3 bytes, shorter than the 8-byte"});
}

TEST_F(SafetensorsReject, HeaderLengthBeyondFile) {
  expect_rejected(u64_le(100) + "{}", {"header length 100 exceeds the file size"});
}

TEST_F(SafetensorsReject, AbsurdHeaderLength) {
  expect_rejected(u64_le(100'000'001) + "{}", {"exceeds the limit"});
  expect_rejected(u64_le(std::numeric_limits<uint64_t>::max()) + "{}", {"exceeds the limit"});
}

TEST_F(SafetensorsReject, BadJson) {
  expect_header_rejected(R"({"a":{"dtype":"F32",)", 0, {"invalid JSON"});
  expect_header_rejected("", 0, {"invalid JSON"});
}

TEST_F(SafetensorsReject, InvalidUtf8InHeader) {
  expect_header_rejected("{\"\xc3\x28\":{}}", 0, {"invalid UTF-8"});
  expect_header_rejected("{\"\xed\xa0\x80\":{}}", 0, {"invalid UTF-8"});  // a surrogate
}

TEST_F(SafetensorsReject, HeaderNotAnObject) {
  expect_header_rejected("[1,2]", 0, {"not a JSON object"});
  expect_header_rejected("\"x\"", 0, {"not a JSON object"});
}

TEST_F(SafetensorsReject, TensorEntryNotAnObject) {
  expect_header_rejected(R"({"a":[1]})", 0, {"tensor \"a\" must be an object"});
}

TEST_F(SafetensorsReject, MissingFields) {
  expect_header_rejected(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4, {"missing \"dtype\""});
  expect_header_rejected(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", 4, {"missing \"shape\""});
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[1]}})", 4, {"missing \"data_offsets\""});
}

TEST_F(SafetensorsReject, IllTypedFields) {
  expect_header_rejected(R"({"a":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", 4,
                         {"dtype must be a string"});
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":1,"data_offsets":[0,4]}})", 4,
                         {"shape must be an array"});
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", 4,
                         {"shape dimension must be a non-negative integer"});
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}})", 4,
                         {"shape dimension must be a non-negative integer"});
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4,
                         {"data_offsets must be an array [begin, end]"});
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 4,
                         {"data_offsets must be an array [begin, end]"});
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,"4"]}})", 4,
                         {"data_offsets end must be a non-negative integer"});
}

TEST_F(SafetensorsReject, UnknownDtype) {
  expect_header_rejected(R"({"a":{"dtype":"F17","shape":[1],"data_offsets":[0,4]}})", 4,
                         {"unknown dtype \"F17\""});
  expect_header_rejected(R"({"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", 4,
                         {"unknown dtype \"f32\""});
}

TEST_F(SafetensorsReject, NegativeShapeOrOffset) {
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4,
                         {"shape dimension is negative"});
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,4]}})", 4,
                         {"data_offsets begin is negative"});
}

TEST_F(SafetensorsReject, OverflowingShape) {
  // 2^32 * 2^32 overflows u64 elements.
  expect_header_rejected(
      R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4,
      {"overflows the element count"});
  // A dimension past int64 cannot be a torch size.
  expect_header_rejected(
      R"({"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,4]}})", 4,
      {"overflows the element count"});
  // Beyond u64 entirely: JSON parses it as a float.
  expect_header_rejected(
      R"({"a":{"dtype":"U8","shape":[99999999999999999999999],"data_offsets":[0,4]}})", 4,
      {"must be a non-negative integer"});
  // Elements fit, bytes do not: 2^62 F32 elements.
  expect_header_rejected(
      R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})", 4,
      {"byte size overflows"});
}

TEST_F(SafetensorsReject, EndBeforeBegin) {
  expect_header_rejected(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 4,
                         {"end 0 < begin 4"});
}

TEST_F(SafetensorsReject, OverlappingOffsets) {
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                         12, {"\"b\"", "overlap"});
}

TEST_F(SafetensorsReject, HoleBetweenTensors) {
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                         12, {"hole", "\"b\""});
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8,
                         {"hole", "\"a\""});
}

TEST_F(SafetensorsReject, BufferNotFullyCovered) {
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8,
                         {"cover 4 bytes of a 8-byte data buffer"});
  expect_header_rejected("{}", 3, {"cover 0 bytes of a 3-byte"});
}

TEST_F(SafetensorsReject, OffsetsPastTheFile) {
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8,
                         {"\"a\"", "past the data buffer"});
}

TEST_F(SafetensorsReject, ByteSizeNotMatchingDtypeTimesShape) {
  expect_header_rejected(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8,
                         {"\"a\"", "byte size mismatch", "needs 12 bytes"});
  expect_header_rejected(R"({"a":{"dtype":"BF16","shape":[],"data_offsets":[0,4]}})", 4,
                         {"needs 2 bytes"});
}

TEST_F(SafetensorsReject, SubByteDtypeNotFillingBytes) {
  expect_header_rejected(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}})", 1,
                         {"does not fill whole bytes"});
}

TEST_F(SafetensorsReject, DuplicateTensorNames) {
  expect_header_rejected(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                         R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                         2, {"duplicate key \"a\""});
  expect_header_rejected(R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", 1,
                         {"duplicate key \"dtype\""});
}

TEST_F(SafetensorsReject, MetadataNotAStringMap) {
  expect_header_rejected(R"({"__metadata__":"pt"})", 0, {"__metadata__ must be an object"});
  expect_header_rejected(R"({"__metadata__":{"step":1}})", 0,
                         {"__metadata__ value for \"step\"", "must be a string"});
  expect_header_rejected(R"({"__metadata__":{"a":"x","a":"y"}})", 0, {"duplicate key \"a\""});
}

TEST_F(SafetensorsReject, DtypeTorchCannotLoadNamesTensorAndDtype) {
  for (const std::string dtype : {"U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0"}) {
    const std::string path = dir_.file(dtype + ".safetensors");
    const int bytes = dtype == "U16" ? 4 : dtype == "U32" ? 8 : dtype == "U64" ? 16 : 2;
    write_bytes(path, safetensors_bytes(R"({"w":{"dtype":")" + dtype +
                                            R"(","shape":[2],"data_offsets":[0,)" +
                                            std::to_string(bytes) + "]}}",
                                        std::string(bytes, '\0')));
    const SafetensorsReader reader(path);  // describable: the header is valid
    EXPECT_TRUE(reader.contains("w"));
    expect_error([&] { reader.tensor("w"); }, {"\"w\"", dtype, "cannot load", path});
  }
}

TEST_F(SafetensorsReject, BoolBytesOtherThanZeroOrOne) {
  const std::string path = dir_.file("bool.safetensors");
  write_bytes(path, safetensors_bytes(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
                                      std::string("\x01\x00\x02", 3)));
  const SafetensorsReader reader(path);
  expect_error([&] { reader.tensor("m"); }, {"\"m\"", "byte 2 at element 2"});
}

}  // namespace
}  // namespace aspen::io
