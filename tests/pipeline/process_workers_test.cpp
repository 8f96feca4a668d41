// A process's workers, before any thread runs: how a worker's failure on another rank
// reaches this process's trainer (the status board), and that stopping workers that
// never started is harmless.
#include "aspen/pipeline/process_workers.h"

#include <gtest/gtest.h>

#include "aspen/dock/in_process_transport.h"
#include "aspen/pipeline/rl_rows.h"
#include "tiny_run.h"

namespace aspen::pipeline {
namespace {

TEST(ProcessWorkers, AWorkerErrorAnotherRankPostedIsRethrownHereNamingTheRank) {
  const TrainConfig config = testing::tiny_run_config({"pipeline.mode=async"});
  RlSetup setup = build_rl_setup(config);
  TransferDock dock(std::make_shared<InProcessTransport>(
      std::make_shared<InProcessDock>(make_rl_schema({}), DockControllerOptions{64}, 1), 0));
  const EngineLayout layout = engine_layout(config, 0, 1);
  ProcessWorkers workers(config, setup, layout, std::nullopt, dock, ProcessWorkersOptions{});
  EXPECT_NO_THROW(workers.check());
  dock.post_status("worker-error/rank 3", "rollout instance 1: out of KV blocks");
  try {
    workers.check();
    FAIL() << "expected the posted error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("out of KV blocks"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 3"), std::string::npos) << what;
  }
  workers.stop();  // never started: nothing to join
  workers.stop();
}

}  // namespace
}  // namespace aspen::pipeline
