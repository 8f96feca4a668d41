// MFU per timed update against GEMM peak readings taken around it, with the readings
// checked before they are divided by.
//
// A peak reading is the best torch::mm rate seen in a short window of a shared machine,
// so a slow moment reads it low, and a low peak flatters the MFU. Two facts expose a low
// reading:
//   - an update cannot run its GEMMs faster than the machine's GEMM peak, so an update
//     whose achieved FLOP/s beats every reading around it proves those readings low;
//   - the peak of a bf16 update is at least the fp32 peak of the same run (`floor`): the
//     same units run the fp32 products, so a bf16 reading under the fp32 one is low
//     (a run printed bf16 MFU 1.03 from a bf16 peak of 157 G against fp32's 322 G).
// Such a reading is re-read (`rereads` more readings, kept in the JSON). The update's
// MFU then divides by the best of its readings and the floor; if the update still beats
// that, its MFU is rejected and listed, never reported, so no MFU above 1 is printed.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/imports.h"

namespace aspen::bench {

class MfuEstimate {
 public:
  // `update_flops`: the FLOPs of one update; `floor`: a lower bound of the true peak
  // (0: none); `read_peak`: one GEMM peak reading in FLOP/s.
  MfuEstimate(double update_flops, double floor, int rereads, std::function<double()> read_peak);

  // The reading before the first update; call once, first.
  void read_first_peak();
  // One timed update took `seconds`: reads the peak after it and judges the update.
  void add_update(double seconds);

  // Accepted updates' MFU, in update order.
  const std::vector<double>& mfu_per_update() const { return mfu_per_update_; }
  // The median of mfu_per_update(); requires at least one accepted update.
  double median_mfu() const;
  // Every update rejected: there is no MFU to report.
  bool has_mfu() const { return !mfu_per_update_.empty(); }
  // The best of every reading (bracketing and re-reads).
  double best_peak() const;

  // {"gemm_peak_readings": bracketing readings (updates + 1), "mfu_per_update",
  //  "mfu" (absent when every update was rejected, "mfu_unavailable" then says why),
  //  "gemm_peak_rereads": [{"update", "readings"}], "mfu_rejected_updates":
  //  [{"update", "flops_per_second", "best_peak"}], "gemm_peak_floor" and
  //  "gemm_peak_below_floor" (with a floor)}. Never a JSON null.
  nlohmann::json to_json() const;

 private:
  double update_flops_;
  double floor_;
  int rereads_;
  std::function<double()> read_peak_;
  std::vector<double> seconds_;
  std::vector<double> readings_;  // bracketing: before the first update and after each
  std::vector<double> mfu_per_update_;
  nlohmann::json rereads_json_ = nlohmann::json::array();
  nlohmann::json rejected_json_ = nlohmann::json::array();
  std::vector<double> reread_values_;
};

}  // namespace aspen::bench
