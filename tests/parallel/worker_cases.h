// Runs a distributed worker mode over real processes and checks its per-case verdicts:
// `aspen launch` starts `ranks` workers (tests/parallel/worker) running `mode` on
// `cases`, and every rank must print "rank R <tag> CASE ok" for every case. Cases share
// one launch because process start-up and rendezvous dominate the time.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "parallel/binaries.h"
#include "run_command.h"

namespace aspen::parallel {

inline void expect_worker_cases_pass(const std::string& mode, const std::string& tag, int ranks,
                                     const std::vector<std::string>& cases) {
  std::string args;
  for (const auto& name : cases) args += " " + name;
  const auto result =
      testing::run_command(kAspen + " launch --nproc-per-node " + std::to_string(ranks) +
                           " --master-port 0 -- " + kWorker + " " + mode + args);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  for (const auto& name : cases) {
    for (int r = 0; r < ranks; ++r) {
      EXPECT_NE(result.output.find("rank " + std::to_string(r) + " " + tag + " " + name + " ok"),
                std::string::npos)
          << "case " << name << " rank " << r << "\n"
          << result.output;
    }
  }
}

}  // namespace aspen::parallel
