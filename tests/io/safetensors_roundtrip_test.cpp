// Round trips through our writer and reader, byte-exact output, and zero-copy loading.
#include <cstring>
#include <fstream>
#include <sstream>

#include "aspen/io/safetensors.h"
#include "aspen/io/safetensors_header.h"
#include "io_test_util.h"

namespace aspen::io {
namespace {

using testing::expect_error;
using testing::safetensors_bytes;
using testing::TempDir;
using testing::u64_le;
using testing::write_bytes;

bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const torch::Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == cb.nbytes() &&
         (ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0);
}

// True if `address` lies inside a memory mapping of the file `path` (Linux).
bool is_mapped_from(const void* address, const std::string& path) {
  std::ifstream maps("/proc/self/maps");
  const auto target = reinterpret_cast<uintptr_t>(address);
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode, file;
    fields >> range >> perms >> offset >> dev >> inode >> file;
    if (file != path) continue;
    const size_t dash = range.find('-');
    const uintptr_t begin = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (target >= begin && target < end) return true;
  }
  return false;
}

TEST(Safetensors, RoundTripsEveryTorchDtypeWithMetadata) {
  TempDir dir;
  torch::manual_seed(0);
  const std::vector<std::pair<std::string, torch::Tensor>> tensors = {
      {"f32", torch::randn({3, 4})},
      {"f16", torch::randn({5}).to(torch::kHalf)},
      {"bf16", torch::randn({2, 3}).to(torch::kBFloat16)},
      {"f64", torch::randn({7}, torch::kDouble)},
      {"i64", torch::tensor({int64_t{-1}, int64_t{1} << 40, int64_t{7}})},
      {"i32", torch::tensor({-5, 0, 2147483647}, torch::kInt)},
      {"i16", torch::tensor({-300, 300}, torch::kShort)},
      {"i8", torch::tensor({-128, 127, 3}, torch::kChar)},
      {"u8", torch::tensor({0, 255, 9}, torch::kByte)},
      {"bool", torch::tensor({true, false, true})},
      {"c64", torch::randn({2}, torch::kComplexFloat)},
      {"scalar", torch::tensor(2.5)},
      {"empty", torch::zeros({0, 3})},
      {"transposed", torch::arange(6, torch::kFloat).reshape({2, 3}).t()},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "ünïcode"}};
  const std::string path = dir.file("all.safetensors");
  write_safetensors(path, tensors, metadata);

  const SafetensorsReader reader(path);
  ASSERT_EQ(reader.names().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(reader.names()[i], tensors[i].first) << "names follow data-offset order";
    const torch::Tensor loaded = reader.tensor(tensors[i].first);
    EXPECT_TRUE(same_bytes(loaded, tensors[i].second)) << tensors[i].first;
  }
  EXPECT_EQ(reader.tensor("scalar").dim(), 0);
  EXPECT_EQ(reader.tensor("empty").sizes(), torch::IntArrayRef({0, 3}));
  EXPECT_EQ(reader.metadata(), metadata);
  EXPECT_EQ(reader.path(), path);
  EXPECT_TRUE(reader.contains("f32"));
  EXPECT_FALSE(reader.contains("missing"));
  expect_error([&] { reader.tensor("missing"); }, {"missing", path});

  const auto all = load_safetensors(path);
  EXPECT_EQ(all.size(), tensors.size());
  EXPECT_TRUE(same_bytes(all.at("bf16"), tensors[2].second));
}

TEST(Safetensors, WritesTheReferenceByteLayout) {
  TempDir dir;
  const std::string path = dir.file("small.safetensors");
  // Ordered as the reference orders them (larger-alignment dtypes first, then by name).
  write_safetensors(path,
                    {{"a", torch::tensor({1.5f, -2.0f})}, {"b", torch::tensor(7, torch::kShort)}},
                    {{"format", "pt"}});

  std::string header = R"({"__metadata__":{"format":"pt"},)"
                       R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"I16","shape":[],"data_offsets":[8,10]}})";
  ASSERT_EQ(header.size(), 138u);
  header += "      ";  // space padding to 144, a multiple of 8
  const std::string data("\x00\x00\xc0\x3f\x00\x00\x00\xc0\x07\x00", 10);  // 1.5f, -2.0f, 7 (LE)
  EXPECT_EQ(testing::read_bytes(path), u64_le(144) + header + data);
}

TEST(Safetensors, ReadsTheUnpaddedExampleFromTheReferenceDocs) {
  TempDir dir;
  const std::string path = dir.file("doc.safetensors");
  write_bytes(path,
              safetensors_bytes(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})",
                                std::string(16, '\0')));
  const torch::Tensor t = SafetensorsReader(path).tensor("test");
  EXPECT_TRUE(torch::equal(t, torch::zeros({2, 2}, torch::kInt)));
}

TEST(Safetensors, AlignedTensorsAreZeroCopyViewsThatOutliveTheReader) {
  TempDir dir;
  const std::string path = dir.file("weights.safetensors");
  const torch::Tensor expected = torch::arange(1024, torch::kFloat).reshape({32, 32});
  write_safetensors(path, {{"w", expected}});

  torch::Tensor view;
  {
    const SafetensorsReader reader(path);
    view = reader.tensor("w");
    EXPECT_TRUE(is_mapped_from(view.data_ptr(), path));
    EXPECT_EQ(reader.tensor("w").data_ptr(), view.data_ptr());
  }
  // The reader is gone; the view's deleter keeps the mapping alive.
  EXPECT_TRUE(is_mapped_from(view.data_ptr(), path));
  EXPECT_TRUE(torch::equal(view, expected));
  // Writing through the view hits a private copy-on-write page, never the file.
  view.add_(1);
  EXPECT_TRUE(torch::equal(SafetensorsReader(path).tensor("w"), expected));
  const void* address = view.data_ptr();
  view = torch::Tensor();
  EXPECT_FALSE(is_mapped_from(address, path)) << "last user gone: unmapped";
}

TEST(Safetensors, MisalignedTensorsAreCopied) {
  TempDir dir;
  const std::string path = dir.file("odd.safetensors");
  // I8 first pushes the F32 to buffer offset 1: not 4-byte aligned in memory.
  write_safetensors(
      path, {{"byte", torch::tensor({5}, torch::kChar)}, {"float", torch::tensor({0.25f, 4.0f})}});
  const SafetensorsReader reader(path);
  const torch::Tensor t = reader.tensor("float");
  EXPECT_FALSE(is_mapped_from(t.data_ptr(), path));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 4, 0u);
  EXPECT_TRUE(torch::equal(t, torch::tensor({0.25f, 4.0f})));
}

TEST(Safetensors, WriterRejectsWhatTheFormatCannotHold) {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  expect_error(
      [&] {
        write_safetensors(path, {{"x", torch::ones(2)}, {"x", torch::ones(2)}});
      },
      {"duplicate", "\"x\"", path});
  expect_error([&] { write_safetensors(path, {{"__metadata__", torch::ones(2)}}); }, {"reserved"});
  expect_error(
      [&] {
        write_safetensors(path, {{"c", torch::ones(2, torch::kComplexDouble)}});
      },
      {"\"c\"", "cannot store"});
  expect_error(
      [&] {
        write_safetensors(path, {{std::string("\xff"), torch::ones(2)}});
      },
      {"UTF-8"});
  expect_error([&] { write_safetensors(path, {{"u", torch::Tensor()}}); }, {"undefined"});
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(Safetensors, WriteReplacesAnExistingFileAtomically) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  write_safetensors(path, {{"a", torch::ones(3)}});
  write_safetensors(path, {{"b", torch::zeros(2)}});
  const SafetensorsReader reader(path);
  EXPECT_EQ(reader.names(), std::vector<std::string>({"b"}));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(SafetensorsHeader, SerializePadsToEightBytes) {
  for (size_t name_length = 1; name_length <= 9; ++name_length) {
    SafetensorsEntry entry;
    entry.name = std::string(name_length, 'n');
    entry.dtype = find_safetensors_dtype("U8");
    entry.shape = {1};
    entry.end = 1;
    const std::string header = serialize_safetensors_header({entry}, {});
    EXPECT_EQ(header.size() % 8, 0u);
    EXPECT_EQ(parse_safetensors_header(header.data(), header.size(), 1, "h").tensors.size(), 1u);
  }
}

}  // namespace
}  // namespace aspen::io
