// The simulator against reality (issue 19's validation): recorded `aspen bench
// pipeline --json --no-dispatch` runs of this machine (tests/support/fixtures/
// bench_pipeline_cpu.json, and bench_pipeline_cpu_inflight.json from the engine of issue
// #36: in-flight weight updates, per-token versions; both measured on an idle 2-core
// machine, docs/simulate.md) are simulated from their sync side's recorded step costs.
// Each side's simulated effective tokens/s must fall within 20% of the measured one and
// the async/sync ratio within 15%. The recorded costs, not this machine's wall time,
// drive it: the test cannot flake. Partial rollouts need a second instance, which on two
// cores shares one with the first (outside the cpu device's one core per device): their
// model is checked against the real engine step for step instead
// (SimulatedInstance.CutsAndResumesLikeTheRealEngine).
#include <gtest/gtest.h>

#include <cmath>

#include "aspen/sim/simulation_spec.h"
#include "aspen/util/file.h"

namespace aspen::sim {
namespace {

nlohmann::json recorded_bench(const std::string& name = "bench_pipeline_cpu.json") {
  return nlohmann::json::parse(
      read_file(std::string(ASPEN_SOURCE_DIR) + "/tests/support/fixtures/" + name));
}

class SimulationValidationOf : public ::testing::TestWithParam<std::string> {};

TEST_P(SimulationValidationOf, SimulatedBenchPipelineIsWithinTolerancesOfTheMeasuredOne) {
  const nlohmann::json measured = recorded_bench(GetParam());
  const nlohmann::json result = simulate_bench_pipeline(measured);
  for (const char* side : {"sync", "async"}) {
    SCOPED_TRACE(side);
    EXPECT_LT(std::abs(result[side]["error"].get<double>()), 0.20) << result[side].dump();
  }
  EXPECT_LT(std::abs(result["ratio"]["error"].get<double>()), 0.15) << result["ratio"].dump();
  // The bubbles the simulation reports are the measured ones within a few points too.
  for (const char* side : {"sync", "async"}) {
    for (const char* bubble : {"trainer_idle", "sorting"}) {
      EXPECT_NEAR(result[side]["simulated_bubbles"][bubble].get<double>(),
                  measured[side]["bubbles"][bubble].get<double>(), 0.1)
          << side << " " << bubble;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Records, SimulationValidationOf,
                         ::testing::Values("bench_pipeline_cpu.json",
                                           "bench_pipeline_cpu_inflight.json"));

TEST(SimulationValidation, CalibrationRecoversTheWorkloadOfTheRecord) {
  const nlohmann::json result = simulate_bench_pipeline(recorded_bench());
  const nlohmann::json& c = result["calibration"];
  EXPECT_EQ(c["iterations"], 16);
  EXPECT_GT(c["step_s"].get<double>() + c["token_s"].get<double>(), 0.0);
  EXPECT_GT(c["train_token_s"].get<double>(), 0.0);
  EXPECT_GE(c["prompt_tokens"].get<double>(), 1.0);
  EXPECT_GE(c["short_response_mean"].get<double>(), 1.0);
}

TEST(SimulationValidation, ARecordWithoutCostsIsRefusedNamingIt) {
  nlohmann::json bench = recorded_bench();
  bench["sync"].erase("iterations");
  EXPECT_THROW(simulate_bench_pipeline(bench), Error);
}

}  // namespace
}  // namespace aspen::sim
