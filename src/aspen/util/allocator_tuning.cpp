#include "aspen/util/allocator_tuning.h"

#include <malloc.h>

#include <climits>
#include <cstdlib>

namespace aspen {

bool keep_freed_memory_for_reuse() {
  if (std::getenv("GLIBC_TUNABLES") != nullptr) return false;  // the user's own setting
  // Blocks up to 1 GiB come from the heap (glibc caps the value it accepts: fall back
  // to its 32 MiB maximum), and a freed heap top stays mapped up to 2 GiB.
  const bool mmap_set = mallopt(M_MMAP_THRESHOLD, 1 << 30) == 1 ||
                        mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  const bool trim_set = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return mmap_set && trim_set;
}

}  // namespace aspen
