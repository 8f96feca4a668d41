// TimeSource: where the time of the ledger comes from — the clock half of LevelDB's Env
// seam. Code that decides by time (dock leases, status-board ages) asks a TimeSource instead
// of std::chrono::steady_clock, so a test can inject faults in time and the simulator
// (sim/) can run the real dock controller on a virtual, discrete-event clock.
//
//   real_clock()   the machine's steady clock; the default everywhere.
//   ManualClock    a virtual clock that only its owner moves (advance_to / advance);
//                  it starts at the epoch of steady_clock's time_point.
// Blocking waits (a claim or allocate with timeout_s) stay real waits on the steady
// clock whatever the TimeSource: a simulator never blocks (it claims with timeout 0).
// Thread safety: now() may be called from any thread; ManualClock's setters too (one
// atomic), though a simulator drives it from one thread.
// Errors: ManualClock refuses to go backwards (aspen::Error naming the times).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace aspen {

class TimeSource {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~TimeSource() = default;
  virtual TimePoint now() const = 0;
};

// The process's steady clock (a shared immutable instance).
const TimeSource& real_clock();

class ManualClock : public TimeSource {
 public:
  ManualClock() = default;
  TimePoint now() const override;
  // Seconds since the clock's start.
  double seconds() const;
  // Moves to `seconds` since the start; earlier than now() is an aspen::Error.
  void advance_to(double seconds);
  void advance(double seconds) { advance_to(this->seconds() + seconds); }

 private:
  std::atomic<int64_t> nanoseconds_{0};
};

}  // namespace aspen
