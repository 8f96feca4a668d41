// Wall-clock seconds elapsed since a steady_clock time point: the one spelling of the
// measurement that stage timers, schedules and benchmarks all make.
#pragma once

#include <chrono>

namespace aspen {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace aspen
