#include "bench/dock_bench.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <thread>

#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/transfer_dock.h"
#include "aspen/dock/warehouse_protocol.h"
#include "aspen/dock/zmq_transport.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"
#include "bench/worker_process.h"

namespace aspen::bench {
namespace {

DockSchema bench_schema() {
  return DockSchema({{"data", torch::kUInt8, ColumnKind::kPerRow}}, {{"train", {"data"}}});
}

struct Worker {
  pid_t pid = -1;
  FILE* to = nullptr;    // its stdin
  FILE* from = nullptr;  // its stdout
  bool consumer = false;
};

Worker spawn_worker(const std::string& exe, std::vector<std::string> args) {
  WorkerProcess process = spawn_worker_process(exe, std::move(args));
  Worker worker;
  worker.pid = process.pid;
  worker.to = fdopen(process.to, "w");
  worker.from = fdopen(process.from, "r");
  return worker;
}

// Reads lines until `expected`; aspen::Error if the worker closes its stdout first.
void expect_line(Worker& worker, const std::string& expected) {
  char line[256];
  while (fgets(line, sizeof line, worker.from) != nullptr) {
    if (std::string(line) == expected + "\n") return;
  }
  throw Error("worker " + std::to_string(worker.pid) + " exited before '" + expected + "'",
              "dock bench", "run the worker alone to see its error");
}

std::string random_token() {
  std::random_device device;
  return "bench-" + std::to_string(device()) + std::to_string(device());
}

nlohmann::json run_one(const DockBenchOptions& options, const std::string& mode, int processes,
                       int64_t row_bytes) {
  const int64_t rows = std::clamp<int64_t>(options.bytes_per_producer / row_bytes, 64, 4096);
  const std::string token = random_token();
  auto controller = std::make_shared<DockController>(
      bench_schema(),
      DockControllerOptions{std::max<int64_t>(256, 8 * options.batch_rows * processes)});
  ControllerService controller_service(controller, ZmqServiceOptions{"tcp://127.0.0.1:*", token});
  std::unique_ptr<WarehouseService> central;
  if (mode == "central") {
    central = std::make_unique<WarehouseService>(std::make_shared<Warehouse>(),
                                                 ZmqServiceOptions{"tcp://127.0.0.1:*", token});
    controller->register_warehouse(central->endpoint());  // id 0
  }
  const std::string exe = options.worker_exe.empty() ? self_executable() : options.worker_exe;
  std::vector<Worker> workers;
  for (int p = 0; p < 2 * processes; ++p) {
    const bool consumer = p >= processes;
    std::vector<std::string> args = options.worker_args;
    for (const std::string& a :
         {std::string("--role"), std::string(consumer ? "consumer" : "producer"),
          std::string("--mode"), mode, std::string("--controller"), controller_service.endpoint(),
          std::string("--rows"), std::to_string(rows), std::string("--row-bytes"),
          std::to_string(row_bytes), std::string("--batch"), std::to_string(options.batch_rows)}) {
      args.push_back(a);
    }
    // The token travels in the environment, not on the command line (ps shows argv).
    setenv("ASPEN_DOCK_TOKEN", token.c_str(), 1);
    workers.push_back(spawn_worker(exe, args));
    workers.back().consumer = consumer;
  }
  try {
    for (Worker& w : workers) expect_line(w, "ready");
    const auto start = std::chrono::steady_clock::now();
    for (Worker& w : workers) {
      fputs("go\n", w.to);
      fflush(w.to);
    }
    for (Worker& w : workers) {
      if (w.consumer) expect_line(w, "done");
    }
    const double seconds =
        seconds_since(start);
    for (Worker& w : workers) {
      if (!w.consumer) expect_line(w, "done");
    }
    for (Worker& w : workers) {
      fclose(w.to);
      fclose(w.from);
      int status = 0;
      waitpid(w.pid, &status, 0);
      check_input(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "worker " + std::to_string(w.pid) + " failed", "dock bench");
    }
    const double total_rows = static_cast<double>(rows * processes);
    return {{"mode", mode},
            {"processes", processes},
            {"row_bytes", row_bytes},
            {"rows", rows * processes},
            {"seconds", seconds},
            {"rows_per_s", total_rows / seconds},
            {"mb_per_s", total_rows * static_cast<double>(row_bytes) / seconds / 1e6},
            {"controller_bytes_in", controller_service.wire_metrics()["bytes_in"]}};
  } catch (...) {
    for (Worker& w : workers) {
      kill(w.pid, SIGKILL);
      waitpid(w.pid, nullptr, 0);
    }
    throw;
  }
}

}  // namespace

nlohmann::json run_dock_bench(const DockBenchOptions& options) {
  nlohmann::json runs = nlohmann::json::array();
  for (int64_t row_bytes : options.row_bytes) {
    for (int processes : options.processes) {
      for (const char* mode : {"central", "dock"}) {
        runs.push_back(run_one(options, mode, processes, row_bytes));
        std::cerr << runs.back().dump() << '\n';
      }
    }
  }
  return {{"runs", runs}};
}

int run_dock_bench_worker(const DockBenchWorkerOptions& options) {
  const char* token = std::getenv("ASPEN_DOCK_TOKEN");
  ZmqTransportOptions transport;
  transport.controller_endpoint = options.controller;
  transport.token = token != nullptr ? token : options.token;
  const bool producer = options.role == "producer";
  if (options.mode == "central") {
    transport.write_warehouse = 0;  // the bench process's warehouse
  } else if (!producer) {
    transport.reader_only = true;
  }
  auto zmq_transport = std::make_shared<ZmqTransport>(transport);
  TransferDock dock(zmq_transport);
  // One payload tensor reused for every row: the benchmark measures the dock, not memset.
  torch::Tensor payload = torch::full({options.row_bytes}, 7, torch::kUInt8);
  std::cout << "ready" << std::endl;
  std::string go;
  std::getline(std::cin, go);
  int64_t done = 0;
  if (producer) {
    while (done < options.rows) {
      const int64_t n = std::min<int64_t>(options.batch_rows, options.rows - done);
      std::vector<RowInfo> infos(n, RowInfo{done, 1, options.row_bytes, 0});
      dock.put(infos, {ColumnData{"data", std::vector<torch::Tensor>(n, payload)}}, 300.0);
      done += n;
    }
    // Serve the warehouse until every row has been consumed and erased.
    while (zmq_transport->local_store() && zmq_transport->local_store()->rows_held() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  } else {
    ClaimOptions claim;
    claim.timeout_s = 30.0;
    while (done < options.rows) {
      claim.max_rows = std::min<int64_t>(options.batch_rows, options.rows - done);
      Claim got = dock.claim("train", claim);
      check_input(!got.empty(), "no rows for 30 s", "dock bench consumer");
      std::vector<ColumnData> data = dock.get(got);
      check_input(data[0].values.size() == got.rows.size() &&
                      data[0].values.front().numel() == options.row_bytes,
                  "short data", "dock bench consumer");
      dock.ack(got);
      done += static_cast<int64_t>(got.rows.size());
    }
  }
  std::cout << "done" << std::endl;
  return 0;
}

}  // namespace aspen::bench
