// The process memory probe against real allocations: touching 100 MB must show up
// in RSS and in the peak, by both the exact (clear_refs) and the sampling path.
#include "aspen/util/memory_usage.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

namespace aspen {
namespace {

constexpr int64_t kMB = 1024 * 1024;
constexpr int64_t kBlock = 100 * kMB;

// malloc + memset: every page is written, so it is resident (a bare malloc of this
// size is an untouched mmap and would not count).
char* allocate_and_touch(int64_t bytes) {
  char* p = static_cast<char*>(std::malloc(bytes));
  EXPECT_NE(p, nullptr);
  std::memset(p, 1, bytes);
  return p;
}

TEST(MemoryUsage, ReadsPlausibleValues) {
  ProcessMemory m = process_memory();
  EXPECT_GT(m.rss_bytes, 1 * kMB);
  EXPECT_GE(m.peak_rss_bytes, m.rss_bytes);
}

TEST(MemoryUsage, TouchingHundredMegabytesRaisesRssByAsMuch) {
  const int64_t before = current_rss_bytes();
  char* p = allocate_and_touch(kBlock);
  const int64_t during = current_rss_bytes();
  std::free(p);  // above glibc's mmap threshold: unmapped at once
  const int64_t after = current_rss_bytes();
  const double grew_mb = double(during - before) / kMB;
  RecordProperty("rss_growth_mb", std::to_string(grew_mb));
  EXPECT_NEAR(grew_mb, 100.0, 10.0);
  EXPECT_LT(after, during - 90 * kMB);
}

TEST(MemoryUsage, ResetPeakLowersItToCurrentRss) {
  char* p = allocate_and_touch(kBlock);
  std::free(p);
  EXPECT_GE(peak_rss_bytes(), current_rss_bytes() + 90 * kMB);
  if (!reset_peak_rss()) GTEST_SKIP() << "/proc/self/clear_refs is not writable here";
  EXPECT_LT(peak_rss_bytes(), current_rss_bytes() + 10 * kMB);
}

void expect_peak_sees_transient_block(PeakRssSampler::Mode mode) {
  PeakRssSampler sampler(mode, std::chrono::milliseconds(1));
  char* p = allocate_and_touch(kBlock);
  // Hold it for many sampling intervals so the sampler cannot miss it.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::free(p);
  const int64_t peak = sampler.peak_bytes();
  EXPECT_GE(peak, sampler.baseline_bytes() + 90 * kMB);
  EXPECT_LE(peak, sampler.baseline_bytes() + 130 * kMB);
  EXPECT_LT(current_rss_bytes(), peak - 80 * kMB);
}

TEST(MemoryUsage, PeakSamplerExactModeSeesTransientBlock) {
  PeakRssSampler probe;
  if (!probe.exact()) GTEST_SKIP() << "clear_refs unavailable; the sampling test covers this";
  expect_peak_sees_transient_block(PeakRssSampler::Mode::kAuto);
}

TEST(MemoryUsage, PeakSamplerSamplingFallbackSeesTransientBlock) {
  {
    PeakRssSampler forced(PeakRssSampler::Mode::kSampling);
    EXPECT_FALSE(forced.exact());
  }
  expect_peak_sees_transient_block(PeakRssSampler::Mode::kSampling);
}

}  // namespace
}  // namespace aspen
