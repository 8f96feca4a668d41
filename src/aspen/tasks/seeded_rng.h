// SplitMix64: a tiny, fully specified PRNG for procedural task generation. std::mt19937
// is specified too, but std::uniform_int_distribution is not (libstdc++ and libc++ draw
// different values), and a task's examples must be identical for a seed on every platform.
// Not thread-safe: one generator per thread.
#pragma once

#include <cstdint>

#include "aspen/tasks/imports.h"

namespace aspen::tasks {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [lo, hi] (inclusive), lo <= hi; rejection sampling, so no modulo bias.
  int64_t uniform(int64_t lo, int64_t hi) {
    uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
    if (span == 0) return static_cast<int64_t>(next());  // the full 64-bit range
    uint64_t limit = UINT64_MAX - UINT64_MAX % span;
    uint64_t draw = next();
    while (draw >= limit) draw = next();
    return lo + static_cast<int64_t>(draw % span);
  }

 private:
  uint64_t state_;
};

}  // namespace aspen::tasks
