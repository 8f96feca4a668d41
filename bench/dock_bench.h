// TransferDock throughput benchmark (`aspen bench dock --json`): P producer and P
// consumer processes move rows of B bytes through
//   mode "dock":    the data stays in the producers' warehouses; the controller (in
//                   the bench process) sees metadata only; consumers fetch from the
//                   producers' warehouses directly;
//   mode "central": one queue process (the bench process, controller + the only
//                   warehouse) that every byte passes through, in and out: the
//                   conventional replay buffer.
// Workers are separate processes started with posix_spawn of worker_exe (default:
// this executable, /proc/self/exe) and worker_args (default the hidden `dock-worker`
// subcommand). Each prints "ready", waits for "go" on stdin, works, prints "done";
// the clock runs from "go" to the last consumer's "done", so process start-up is not
// measured. Each consumer consumes exactly rows_per_producer rows.
// Reports {"runs": [{"mode", "processes", "row_bytes", "rows", "seconds",
// "rows_per_s", "mb_per_s"}, ...]}. Throws aspen::Error if a worker fails.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/imports.h"

namespace aspen::bench {

struct DockBenchOptions {
  std::vector<int> processes = {1, 2, 4, 8};
  std::vector<int64_t> row_bytes = {1024, 256 * 1024};
  int64_t bytes_per_producer = int64_t{32} << 20;  // rows = this / row_bytes, in [64, 4096]
  int batch_rows = 16;                             // rows per claim
  std::string worker_exe;                          // default /proc/self/exe
  std::vector<std::string> worker_args = {"dock-worker"};
};

nlohmann::json run_dock_bench(const DockBenchOptions& options);

// One worker process (the `dock-worker` subcommand). Returns the exit status.
struct DockBenchWorkerOptions {
  std::string role;  // producer | consumer
  std::string mode;  // dock | central
  std::string controller;
  std::string token;
  int64_t rows = 0;
  int64_t row_bytes = 0;
  int batch_rows = 16;
};
int run_dock_bench_worker(const DockBenchWorkerOptions& options);

}  // namespace aspen::bench
