// Process memory probe: resident set size now and at its peak, read from
// /proc/self/status (VmRSS, VmHWM). Linux only.
//
// The kernel keeps one peak (VmHWM) per process. reset_peak_rss() lowers it to the
// current RSS by writing "5" to /proc/self/clear_refs (Linux >= 4.0). Where that
// file cannot be written (old kernels, some sandboxes), PeakRssSampler falls back
// to sampling VmRSS from a background thread; the sampled peak can miss a spike
// shorter than the interval, so it is a lower bound.
//
// Because the peak is per process, two measurements that overlap in time (two
// threads each resetting it) disturb each other; measure one region at a time.
// Errors: aspen::Error naming /proc/self/status when it cannot be read or lacks a
// field. Thread safety: the free functions are safe to call from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "aspen/util/mutex.h"

namespace aspen {

struct ProcessMemory {
  int64_t rss_bytes = 0;       // VmRSS: resident now (anonymous + file-backed + shmem)
  int64_t peak_rss_bytes = 0;  // VmHWM: highest VmRSS since start or the last reset
};

ProcessMemory process_memory();
int64_t current_rss_bytes();
int64_t peak_rss_bytes();

// Resets the kernel's peak (VmHWM) to the current RSS. Returns false, changing
// nothing, when /proc/self/clear_refs is not writable.
bool reset_peak_rss();

// Peak RSS over the lifetime of this object (RAII: construct at the start of the
// measured region, read peak_bytes() at its end).
//   kAuto: reset the kernel's peak and read VmHWM (exact); if the reset is not
//          possible, sample instead.
//   kSampling: always sample VmRSS every `interval` on a background thread (the
//          fallback, selectable so that it can be tested where kAuto is exact).
class PeakRssSampler {
 public:
  enum class Mode { kAuto, kSampling };

  explicit PeakRssSampler(Mode mode = Mode::kAuto,
                          std::chrono::microseconds interval = std::chrono::milliseconds(2));
  ~PeakRssSampler();
  PeakRssSampler(const PeakRssSampler&) = delete;
  PeakRssSampler& operator=(const PeakRssSampler&) = delete;

  // Highest RSS seen since construction (includes a sample taken now).
  int64_t peak_bytes();
  // RSS when the object was constructed.
  int64_t baseline_bytes() const { return baseline_; }
  // True when the peak comes from the kernel (VmHWM) rather than from sampling.
  bool exact() const { return exact_; }

 private:
  void sample_loop(std::chrono::microseconds interval);
  void observe(int64_t rss);

  int64_t baseline_ = 0;
  bool exact_ = false;
  std::atomic<int64_t> sampled_peak_{0};
  Mutex mutex_;
  CondVar wake_;
  bool stop_ GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace aspen
