// Whole-file reads and writes with errors that name the path.
#pragma once

#include <string>

namespace aspen {

// Returns the bytes of `path`. Throws aspen::Error naming the path if it cannot be read.
std::string read_file(const std::string& path);

// Writes `bytes` to `path` atomically (temp file + rename), so a crash never
// leaves a half-written file under the final name. Throws aspen::Error on failure.
void write_file_atomic(const std::string& path, const std::string& bytes);

}  // namespace aspen
