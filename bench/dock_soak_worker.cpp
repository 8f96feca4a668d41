// The worker processes of the dock soak (bench/dock_soak.h states their protocol):
// a producer that puts self-describing rows (dock_soak_rows.h) until told to stop,
// then serves its warehouse; a consumer that claims, verifies, journals, then acks.
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <thread>

#include "aspen/dock/transfer_dock.h"
#include "aspen/dock/zmq_transport.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"
#include "bench/imports.h"
#include "bench/dock_soak.h"
#include "bench/dock_soak_rows.h"

namespace aspen::bench {
namespace {

// The driver's lines on stdin: "stop" sets stop; end of input (the driver closed our
// stdin or died) sets both. A reader thread, so the work loops never block on it.
struct SoakStdin {
  std::atomic<bool> stop{false};
  std::atomic<bool> closed{false};
};

void watch_soak_stdin(SoakStdin& flags) {
  std::thread([&flags] {
    std::string line;
    char c;
    while (read(0, &c, 1) == 1) {
      if (c != '\n') {
        line += c;
        continue;
      }
      if (line == "stop") flags.stop = true;
      line.clear();
    }
    flags.stop = true;
    flags.closed = true;
  }).detach();
}

ZmqTransportOptions soak_transport(const DockSoakWorkerOptions& options, bool reader_only) {
  const char* token = std::getenv("ASPEN_DOCK_TOKEN");
  check_input(token != nullptr, "ASPEN_DOCK_TOKEN is not set", "dock soak worker",
              "the soak driver starts its workers itself");
  ZmqTransportOptions transport;
  transport.controller_endpoint = options.controller;
  transport.token = token;
  transport.reader_only = reader_only;
  // A consumer's fetch from a producer killed a moment ago must fail soon (it then
  // releases the lease); the largest fetch (batch x 1 MB on loopback) takes far less.
  transport.rpc_timeout_s = reader_only ? 5.0 : 30.0;
  return transport;
}

int run_soak_producer(const DockSoakWorkerOptions& options, SoakStdin& input) {
  auto transport = std::make_shared<ZmqTransport>(soak_transport(options, false));
  const WarehouseId self = transport->local_warehouse_id();
  std::cout << "ready " << self << std::endl;
  int64_t sequence = 0;
  while (!input.stop) {
    std::vector<RowInfo> infos;
    ColumnData data{"data", {}};
    for (int i = 0; i < options.batch_rows; ++i) {
      const int64_t key = soak_row_key(options.incarnation, sequence++);
      data.values.push_back(soak_row_data(key, options.seed, options.max_row_bytes));
      infos.push_back(RowInfo{key, 1, data.values.back().numel(), 0, -1});
    }
    // TransferDock::put's steps, with a short wait at capacity so "stop" is seen soon;
    // rows not allocated in time are dropped (their keys are never used).
    std::vector<RowId> ids = transport->controller().allocate(infos, 1.0, self);
    if (ids.empty()) continue;
    transport->local_warehouse().put(ids, {data});
    transport->controller().publish(ids, {"data"}, self);
  }
  std::cout << "stopped" << std::endl;
  while (!input.closed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return 0;
}

int run_soak_consumer(const DockSoakWorkerOptions& options, SoakStdin& input) {
  TransferDock dock(std::make_shared<ZmqTransport>(soak_transport(options, true)));
  std::cout << "ready" << std::endl;
  ClaimOptions claim_options;
  claim_options.max_rows = options.batch_rows;
  claim_options.timeout_s = 0.5;  // then look at stdin again
  claim_options.lease_s = options.lease_s;
  while (!input.stop) {
    Claim claim;
    std::vector<ColumnData> data;
    try {
      claim = dock.claim(options.consumer, claim_options);
      if (claim.empty()) continue;
      data = dock.get(claim);
    } catch (const Error& error) {
      // A dead producer's warehouse (or a slow one): give the rows back; the driver
      // retires a killed producer's rows, the others are claimed again.
      log_warn("dock soak consumer: ", error.what());
      try {
        if (claim.lease != 0) dock.release(claim);
      } catch (const Error&) {
        // The lease expires on its own.
      }
      continue;
    }
    // The journal reaches the driver before the ack reaches the controller.
    std::string ok = "ok";
    for (size_t i = 0; i < claim.rows.size(); ++i) {
      const ClaimedRow& row = claim.rows[i];
      std::string bad = soak_row_mismatch(data[0].values[i], row.info.group_id, options.seed,
                                          options.max_row_bytes);
      if (bad.empty() && data[0].values[i].numel() != row.info.tokens) {
        bad = "size differs from the controller's record";
      }
      if (bad.empty()) {
        ok += " " + std::to_string(row.id);
      } else {
        std::cout << "bad " << row.id << " " << bad << std::endl;
      }
    }
    std::cout << ok << std::endl;
    try {
      dock.ack(claim);  // false after expiry: someone else consumes those rows
    } catch (const Error& error) {
      log_warn("dock soak consumer: ack: ", error.what());
    }
  }
  std::cout << "done" << std::endl;
  return 0;
}

}  // namespace

int run_dock_soak_worker(const DockSoakWorkerOptions& options) {
  // Die with the driver, whatever happens to it (it may be SIGKILLed itself).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 1;  // the driver died before prctl
  check_input(options.max_row_bytes >= 1 && options.batch_rows >= 1 && options.lease_s > 0,
              "max_row_bytes " + std::to_string(options.max_row_bytes) + ", batch " +
                  std::to_string(options.batch_rows),
              "dock soak worker");
  static SoakStdin input;  // the reader thread outlives this call
  watch_soak_stdin(input);
  if (options.role == "soak-producer") return run_soak_producer(options, input);
  check_input(options.role == "soak-consumer", "role '" + options.role + "'",
              "dock soak worker", "soak-producer or soak-consumer");
  return run_soak_consumer(options, input);
}

}  // namespace aspen::bench
