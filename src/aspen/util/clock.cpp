#include "aspen/util/clock.h"

#include <cmath>
#include <string>

#include "aspen/util/error.h"

namespace aspen {
namespace {

class RealClock : public TimeSource {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace

const TimeSource& real_clock() {
  static const RealClock clock;
  return clock;
}

TimeSource::TimePoint ManualClock::now() const {
  return TimePoint(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::nanoseconds(nanoseconds_.load())));
}

double ManualClock::seconds() const {
  return static_cast<double>(nanoseconds_.load()) * 1e-9;
}

void ManualClock::advance_to(double seconds) {
  check_input(std::isfinite(seconds) && seconds * 1e9 < 9.0e18,
              "time " + std::to_string(seconds) + " s", "ManualClock::advance_to",
              "a finite time below 9e9 s");
  const auto target = static_cast<int64_t>(std::llround(seconds * 1e9));
  const int64_t current = nanoseconds_.load();
  check_input(target >= current,
              "time " + std::to_string(seconds) + " s before the clock's " +
                  std::to_string(static_cast<double>(current) * 1e-9) + " s",
              "ManualClock::advance_to", "a virtual clock only moves forward");
  nanoseconds_.store(target);
}

}  // namespace aspen
