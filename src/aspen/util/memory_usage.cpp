#include "aspen/util/memory_usage.h"

#include <fstream>
#include <sstream>
#include <string>

#include "aspen/util/error.h"

namespace aspen {
namespace {

constexpr const char* kStatusPath = "/proc/self/status";

// "VmRSS:\t  123456 kB" -> 123456 * 1024. Returns -1 when the line is not `key`.
int64_t parse_kb_line(const std::string& line, const std::string& key) {
  if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() ||
      line[key.size()] != ':') {
    return -1;
  }
  std::istringstream in(line.substr(key.size() + 1));
  int64_t kb = -1;
  std::string unit;
  in >> kb >> unit;
  if (!in || unit != "kB" || kb < 0) throw Error("cannot parse '" + line + "'", kStatusPath);
  return kb * 1024;
}

}  // namespace

ProcessMemory process_memory() {
  // std::ifstream rather than a cached fd: /proc files must be re-read from the start
  // for fresh values, and the file is small.
  std::ifstream in(kStatusPath);
  if (!in) throw Error("cannot open", kStatusPath, "process memory is only measured on Linux");
  ProcessMemory memory;
  bool have_rss = false, have_hwm = false;
  std::string line;
  while (std::getline(in, line) && !(have_rss && have_hwm)) {
    if (int64_t v = parse_kb_line(line, "VmRSS"); v >= 0) {
      memory.rss_bytes = v;
      have_rss = true;
    } else if (int64_t w = parse_kb_line(line, "VmHWM"); w >= 0) {
      memory.peak_rss_bytes = w;
      have_hwm = true;
    }
  }
  check_input(have_rss && have_hwm, "has no VmRSS/VmHWM lines", kStatusPath);
  return memory;
}

int64_t current_rss_bytes() { return process_memory().rss_bytes; }
int64_t peak_rss_bytes() { return process_memory().peak_rss_bytes; }

bool reset_peak_rss() {
  // "5" resets the peak RSS (Documentation/filesystems/proc.rst, clear_refs); the
  // values 1-4 would clear page referenced/soft-dirty bits instead, which we avoid.
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

PeakRssSampler::PeakRssSampler(Mode mode, std::chrono::microseconds interval) {
  baseline_ = current_rss_bytes();
  sampled_peak_ = baseline_;
  exact_ = mode == Mode::kAuto && reset_peak_rss();
  if (!exact_) thread_ = std::thread([this, interval] { sample_loop(interval); });
}

PeakRssSampler::~PeakRssSampler() {
  if (!thread_.joinable()) return;
  {
    MutexLock lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void PeakRssSampler::observe(int64_t rss) {
  int64_t seen = sampled_peak_.load();
  while (rss > seen && !sampled_peak_.compare_exchange_weak(seen, rss)) {
  }
}

void PeakRssSampler::sample_loop(std::chrono::microseconds interval) {
  while (true) {
    // Sampled without the lock: reading /proc must not hold up the destructor.
    try {
      observe(current_rss_bytes());
    } catch (const Error&) {
      return;  // /proc vanished mid-run: keep the peak seen so far
    }
    const auto next_sample = std::chrono::steady_clock::now() + interval;
    MutexLock lock(mutex_);
    while (!stop_ && wake_.wait_until(mutex_, next_sample)) {
    }
    if (stop_) return;
  }
}

int64_t PeakRssSampler::peak_bytes() {
  if (exact_) return peak_rss_bytes();
  observe(current_rss_bytes());
  return sampled_peak_.load();
}

}  // namespace aspen
