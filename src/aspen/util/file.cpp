#include "aspen/util/file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "aspen/util/error.h"

namespace aspen {

std::string read_file(const std::string& path) {
  // A directory opens as an empty stream on Linux: it would read as an empty file.
  std::error_code ignored;
  check_input(!std::filesystem::is_directory(path, ignored), "is a directory, not a file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(std::string("cannot open for reading: ") + std::strerror(errno), path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error("read failed", path);
  return buffer.str();
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(std::string("cannot open for writing: ") + std::strerror(errno), temp);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) throw Error("write failed (disk full?)", temp);
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    throw Error(std::string("cannot rename into place: ") + std::strerror(errno), path);
  }
}

}  // namespace aspen
