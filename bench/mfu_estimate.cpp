#include "bench/mfu_estimate.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "bench/imports.h"

namespace aspen::bench {
namespace {

// The call order and arguments are the caller's invariants, not user input.
void require(bool condition, const char* what) {
  if (!condition) throw std::logic_error(what);
}

}  // namespace

MfuEstimate::MfuEstimate(double update_flops, double floor, int rereads,
                         std::function<double()> read_peak)
    : update_flops_(update_flops),
      floor_(floor),
      rereads_(rereads),
      read_peak_(std::move(read_peak)) {
  require(update_flops_ > 0 && floor_ >= 0 && rereads_ >= 0,
        "MfuEstimate: update_flops > 0, floor >= 0 and rereads >= 0");
}

void MfuEstimate::read_first_peak() {
  require(readings_.empty(), "MfuEstimate: the first peak is read once, before any update");
  readings_.push_back(read_peak_());
}

void MfuEstimate::add_update(double seconds) {
  require(readings_.size() == seconds_.size() + 1, "MfuEstimate: read_first_peak() comes first");
  const size_t update = seconds_.size();
  seconds_.push_back(seconds);
  readings_.push_back(read_peak_());
  const double achieved = update_flops_ / seconds;
  double best = std::max(readings_[update], readings_[update + 1]);
  // A reading the update beats, or one under the floor, is low: read again.
  std::vector<double> extra;
  while (static_cast<int>(extra.size()) < rereads_ && (achieved > best || best < floor_)) {
    extra.push_back(read_peak_());
    best = std::max(best, extra.back());
  }
  if (!extra.empty()) {
    rereads_json_.push_back({{"update", update}, {"readings", extra}});
    reread_values_.insert(reread_values_.end(), extra.begin(), extra.end());
  }
  const double peak = std::max(best, floor_);
  if (achieved > peak) {
    rejected_json_.push_back(
        {{"update", update}, {"flops_per_second", achieved}, {"best_peak", peak}});
    return;
  }
  mfu_per_update_.push_back(achieved / peak);
}

double MfuEstimate::median_mfu() const {
  require(has_mfu(), "MfuEstimate: no accepted update");
  std::vector<double> sorted = mfu_per_update_;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  return n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

double MfuEstimate::best_peak() const {
  double best = 0;
  for (double r : readings_) best = std::max(best, r);
  for (double r : reread_values_) best = std::max(best, r);
  return best;
}

nlohmann::json MfuEstimate::to_json() const {
  nlohmann::json out = {{"gemm_peak_flops_per_second", best_peak()},
                        {"gemm_peak_readings", readings_},
                        {"gemm_peak_rereads", rereads_json_},
                        {"mfu_per_update", mfu_per_update_},
                        {"mfu_rejected_updates", rejected_json_}};
  if (has_mfu()) {
    out["mfu"] = median_mfu();
  } else {
    out["mfu_unavailable"] =
        "every timed update beat the GEMM peak read around it, even after re-reading: the "
        "peak readings were low (a busy machine), so no MFU is reported";
  }
  if (floor_ > 0) {
    out["gemm_peak_floor"] = floor_;
    out["gemm_peak_below_floor"] = best_peak() < floor_;
  }
  return out;
}

}  // namespace aspen::bench
