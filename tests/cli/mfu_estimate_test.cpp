// `bench train`'s MFU never divides by a GEMM peak reading the update proves low: an
// update that beats its readings gets them re-read and is rejected if it still beats
// them, and a bf16 peak is never taken below the run's fp32 peak (bench/mfu_estimate.h).
#include "bench/mfu_estimate.h"

#include <gtest/gtest.h>

#include <deque>

namespace aspen::cli {
namespace {

using namespace aspen::bench;

// Peak readings served in order, as a fake GEMM timer.
struct ScriptedPeaks {
  std::deque<double> readings;
  int reads = 0;
  double operator()() {
    ++reads;
    const double r = readings.front();
    readings.pop_front();
    return r;
  }
};

TEST(MfuEstimate, DividesEachUpdateByTheBetterReadingAroundIt) {
  auto peaks = std::make_shared<ScriptedPeaks>();
  peaks->readings = {100, 200, 150};
  MfuEstimate estimate(/*update_flops=*/100, /*floor=*/0, /*rereads=*/2, [peaks] { return (*peaks)(); });
  estimate.read_first_peak();
  estimate.add_update(1.0);  // 100 FLOP/s against max(100, 200)
  estimate.add_update(2.0);  // 50 FLOP/s against max(200, 150)
  EXPECT_EQ(peaks->reads, 3);  // no re-reads
  ASSERT_EQ(estimate.mfu_per_update().size(), 2u);
  EXPECT_DOUBLE_EQ(estimate.mfu_per_update()[0], 0.5);
  EXPECT_DOUBLE_EQ(estimate.mfu_per_update()[1], 0.25);
  EXPECT_DOUBLE_EQ(estimate.median_mfu(), 0.375);
  const nlohmann::json json = estimate.to_json();
  EXPECT_EQ(json["gemm_peak_readings"], nlohmann::json({100, 200, 150}));
  EXPECT_TRUE(json["mfu_rejected_updates"].empty());
  EXPECT_FALSE(json.contains("gemm_peak_floor"));
}

TEST(MfuEstimate, ReReadsAPeakTheUpdateBeatsAndUsesTheBetterReading) {
  auto peaks = std::make_shared<ScriptedPeaks>();
  peaks->readings = {50, 60, 400};  // the update runs 200 FLOP/s: 50 and 60 are low
  MfuEstimate estimate(200, 0, 2, [peaks] { return (*peaks)(); });
  estimate.read_first_peak();
  estimate.add_update(1.0);
  EXPECT_EQ(peaks->reads, 3);  // one re-read sufficed
  ASSERT_EQ(estimate.mfu_per_update().size(), 1u);
  EXPECT_DOUBLE_EQ(estimate.mfu_per_update()[0], 0.5);
  const nlohmann::json json = estimate.to_json();
  ASSERT_EQ(json["gemm_peak_rereads"].size(), 1u);
  EXPECT_EQ(json["gemm_peak_rereads"][0]["readings"], nlohmann::json({400}));
  EXPECT_DOUBLE_EQ(json["gemm_peak_flops_per_second"].get<double>(), 400);
}

TEST(MfuEstimate, RejectsAnUpdateThatBeatsEveryReadingAndNeverReportsMfuAboveOne) {
  auto peaks = std::make_shared<ScriptedPeaks>();
  peaks->readings = {50, 60, 70, 80};
  MfuEstimate estimate(200, 0, 2, [peaks] { return (*peaks)(); });
  estimate.read_first_peak();
  estimate.add_update(1.0);  // 200 FLOP/s beats 50, 60 and both re-reads
  EXPECT_EQ(peaks->reads, 4);
  EXPECT_FALSE(estimate.has_mfu());
  const nlohmann::json json = estimate.to_json();
  EXPECT_FALSE(json.contains("mfu"));
  EXPECT_TRUE(json.contains("mfu_unavailable"));
  ASSERT_EQ(json["mfu_rejected_updates"].size(), 1u);
  EXPECT_EQ(json["mfu_rejected_updates"][0]["update"], 0);
  EXPECT_DOUBLE_EQ(json["mfu_rejected_updates"][0]["best_peak"].get<double>(), 80);
  // No null anywhere in what the bench prints.
  EXPECT_EQ(json.dump().find("null"), std::string::npos) << json.dump();
}

TEST(MfuEstimate, ABf16PeakUnderTheFp32OneIsReReadThenFloored) {
  // The run: bf16 read 157 G against fp32's 322 G.
  auto peaks = std::make_shared<ScriptedPeaks>();
  peaks->readings = {157e9, 160e9, 150e9, 155e9};
  MfuEstimate estimate(200e9, /*floor=*/322e9, 2, [peaks] { return (*peaks)(); });
  estimate.read_first_peak();
  estimate.add_update(1.0);  // 200 G beats the bf16 readings but not the fp32 floor
  EXPECT_EQ(peaks->reads, 4);  // both re-reads spent
  ASSERT_TRUE(estimate.has_mfu());
  EXPECT_DOUBLE_EQ(estimate.median_mfu(), 200.0 / 322.0);
  const nlohmann::json json = estimate.to_json();
  EXPECT_TRUE(json["gemm_peak_below_floor"].get<bool>());
  EXPECT_DOUBLE_EQ(json["gemm_peak_floor"].get<double>(), 322e9);
}

TEST(MfuEstimate, KeepsAcceptedUpdatesBesideARejectedOne) {
  auto peaks = std::make_shared<ScriptedPeaks>();
  peaks->readings = {100, 100, 100, 100, 100};
  MfuEstimate estimate(100, 0, 2, [peaks] { return (*peaks)(); });
  estimate.read_first_peak();
  estimate.add_update(0.5);  // 200 FLOP/s: beats 100 through both re-reads
  estimate.add_update(2.0);  // 50 FLOP/s
  ASSERT_EQ(estimate.mfu_per_update().size(), 1u);
  EXPECT_DOUBLE_EQ(estimate.median_mfu(), 0.5);
  EXPECT_EQ(estimate.to_json()["mfu_rejected_updates"].size(), 1u);
}

}  // namespace
}  // namespace aspen::cli
