// Helpers shared by the io tests: a self-deleting temp directory, raw file
// writes for crafted (malformed) inputs, and an assertion that a call throws
// aspen::Error whose message mentions given words.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include "aspen/util/error.h"

namespace aspen::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "aspen_io_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::string u64_le(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return bytes;
}

// A safetensors file from raw parts: length prefix, header text as given (no
// padding added), data bytes.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

// Runs `call`, expecting aspen::Error whose message contains every one of `words`.
template <typename Call>
void expect_error(Call call, std::initializer_list<std::string> words) {
  try {
    call();
    ADD_FAILURE() << "expected aspen::Error mentioning \"" << *words.begin() << "\"";
  } catch (const aspen::Error& error) {
    for (const std::string& word : words) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr(word));
    }
  }
}

}  // namespace aspen::testing
