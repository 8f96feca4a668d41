// The executables the distributed tests start: `aspen` (for `aspen launch`) and the
// rank-process worker (tests/parallel/worker).
#pragma once

#include <string>

namespace aspen::parallel {

inline const std::string kAspen = ASPEN_CLI_PATH;
inline const std::string kWorker = ASPEN_DIST_WORKER_PATH;

}  // namespace aspen::parallel
