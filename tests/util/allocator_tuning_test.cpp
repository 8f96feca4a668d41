// keep_freed_memory_for_reuse sets glibc's thresholds (not under AddressSanitizer, whose
// allocator replaces glibc's), and leaves them to the user when GLIBC_TUNABLES is set.
#include "aspen/util/allocator_tuning.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace aspen {
namespace {

TEST(AllocatorTuning, SetsTheThresholdsUnlessGlibcTunablesIsSet) {
  const char* before = std::getenv("GLIBC_TUNABLES");
  const std::string saved = before != nullptr ? before : "";
  unsetenv("GLIBC_TUNABLES");
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's allocator replaces glibc's: its mallopt sets nothing.
  EXPECT_FALSE(keep_freed_memory_for_reuse());
#else
  EXPECT_TRUE(keep_freed_memory_for_reuse());
#endif
  setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=1048576", 1);
  EXPECT_FALSE(keep_freed_memory_for_reuse());
  if (before != nullptr) {
    setenv("GLIBC_TUNABLES", saved.c_str(), 1);
  } else {
    unsetenv("GLIBC_TUNABLES");
  }
}

}  // namespace
}  // namespace aspen
