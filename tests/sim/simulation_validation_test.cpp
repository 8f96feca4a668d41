// The simulator against reality (issue 19's validation): a recorded `aspen bench
// pipeline --json --no-dispatch` run of this machine (tests/support/fixtures/
// bench_pipeline_cpu.json, measured on an idle 2-core machine, docs/simulate.md) is
// simulated from its sync side's recorded step costs. Each side's simulated effective
// tokens/s must fall within 20% of the measured one and the async/sync ratio within 15%.
// The recorded costs, not this machine's wall time, drive it: the test cannot flake.
#include <gtest/gtest.h>

#include <cmath>

#include "aspen/sim/simulation_spec.h"
#include "aspen/util/file.h"

namespace aspen::sim {
namespace {

nlohmann::json recorded_bench() {
  return nlohmann::json::parse(
      read_file(std::string(ASPEN_SOURCE_DIR) + "/tests/support/fixtures/bench_pipeline_cpu.json"));
}

TEST(SimulationValidation, SimulatedBenchPipelineIsWithinTolerancesOfTheMeasuredOne) {
  const nlohmann::json result = simulate_bench_pipeline(recorded_bench());
  for (const char* side : {"sync", "async"}) {
    SCOPED_TRACE(side);
    EXPECT_LT(std::abs(result[side]["error"].get<double>()), 0.20) << result[side].dump();
  }
  EXPECT_LT(std::abs(result["ratio"]["error"].get<double>()), 0.15) << result["ratio"].dump();
  // The bubbles the simulation reports are the measured ones within a few points too.
  const nlohmann::json measured = recorded_bench();
  for (const char* side : {"sync", "async"}) {
    for (const char* bubble : {"trainer_idle", "sorting"}) {
      EXPECT_NEAR(result[side]["simulated_bubbles"][bubble].get<double>(),
                  measured[side]["bubbles"][bubble].get<double>(), 0.1)
          << side << " " << bubble;
    }
  }
}

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
