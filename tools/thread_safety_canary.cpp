// The canary of tools/check_thread_safety.py: one write to a GUARDED_BY member without
// its lock. The check first requires clang to reject this file; if it did not, the
// annotations would be inert (no clang attributes, or macros defined empty) and every
// translation unit would pass unchecked.
#include "aspen/util/mutex.h"

namespace aspen {

class Canary {
 public:
  void write_without_the_lock() { value_ = 1; }

 private:
  Mutex mutex_;
  int value_ GUARDED_BY(mutex_) = 0;
};

}  // namespace aspen
