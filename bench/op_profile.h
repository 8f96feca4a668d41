// An operator-level profile of a stretch of code: torch's profiler (Kineto, CPU
// activities, with input shapes) between construction and save(), written as a Chrome
// trace (chrome://tracing, Perfetto). `aspen bench train --profile DIR` wraps one extra
// update per dtype in it; tools/op_profile_summary.py sums a trace by operator and shape.
//
// One at a time per process (torch's profiler is process-wide); the destructor stops an
// unsaved profile without writing it.
#pragma once

#include <string>

#include "bench/imports.h"

namespace aspen::bench {

class OpProfile {
 public:
  OpProfile();
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;

  // Stops profiling and writes the trace to `path`; throws AspenError if it cannot.
  void save(const std::string& path);

 private:
  bool active_ = false;
};

}  // namespace aspen::bench
