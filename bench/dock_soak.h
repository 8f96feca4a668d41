// The dock soak with faults (`aspen bench dock --soak SECONDS`): producer and
// consumer processes on loopback move rows through a TransferDock in "dock" mode
// (the data stays in the producers' warehouses; the controller, in this process,
// sees metadata only) while this process SIGKILLs random workers and starts their
// replacements. At the end it checks the dock's promises and prints a JSON report.
//
// Workers (the hidden `dock-worker --role soak-producer|soak-consumer`, posix_spawn
// of worker_exe) talk to the driver in lines over stdin/stdout:
//   producer: prints "ready <warehouse id>", puts rows (dock_soak_rows.h: random
//             size 1..max_row_bytes, content derived from the row's key) until it
//             reads "stop", prints "stopped", serves its warehouse until stdin ends.
//   consumer: serves one consumer name of the schema (consumer process i serves
//             name i % consumer_names: "c0", "c1", ...; a replacement serves the
//             name of the process it replaces). Prints "ready", then claims, fetches,
//             verifies every row against its key, journals "ok <row ids>" and
//             "bad <row id> <what>" on stdout, and only then acks; on a fetch
//             failure (a dead producer's warehouse) it releases the lease. Reads
//             "stop": prints "done" and exits.
// Kills: at exponential intervals (mean kill_every_s, seeded RNG) a random ready
// worker gets SIGKILL, a producer and a consumer in turn; a killed producer's warehouse is retired at once
// (DockController::retire_warehouse: its rows are lost with it); every killed
// worker is replaced. Any other worker death is an error.
// End: at soak_s producers are told to stop; once all have stopped the consumers
// drain the dock (live rows 0), are stopped; then the open leases must be 0 (a
// killed consumer's lease has expired by then: lease_s), and every surviving
// producer's warehouse must hold 0 rows and 0 bytes, measured over the wire. A
// consumer killed between its ack and its erase (or whose erase timed out) leaves
// retired rows in a producer's warehouse; those are swept first (erased by id: all
// rows the warehouse ever owned) and reported as orphans_swept; anything left after
// the sweep is a violation.
// Accounting rule (SoakLedger): consumption is what the controller recorded as
// acked (DockLedgerHooks::acked), never what a consumer says; the consumer's journal
// line for a lease is written before its ack, so every acked row must have a journal
// entry of a process of that consumer (else: unverified_acks). A kill between journal
// and ack leaves an entry without an ack (the row comes back after its lease and is
// processed again: harmless); a kill between ack and anything after it changes
// nothing the verdict reads. Invariants: every row not lost is acked exactly once by
// every consumer; a lost row was retired with the warehouse of a killed producer
// that owned or held it (published rows whose data died there, and rows allocated
// but not yet published); duplicates, integrity failures, unverified acks, leaked
// leases, live rows and held bytes are 0.
// The report lists the invariants that failed under "violations" (empty: all hold);
// `aspen bench dock --soak` prints it, then exits with an aspen::Error naming them.
// run_dock_soak throws aspen::Error itself when a worker fails on its own or does
// not start, or when the drain does not finish within drain_timeout_s.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/imports.h"

namespace aspen::bench {

struct DockSoakOptions {
  double soak_s = 600;
  int producers = 8;
  int consumers = 8;        // processes
  int consumer_names = 2;   // schema consumers: every row is consumed once by each
  int64_t max_row_bytes = int64_t{1} << 20;
  double kill_every_s = 5;  // mean interval between kills
  uint64_t seed = 1;
  int batch_rows = 8;                 // rows per put and per claim
  double lease_s = 10;                // consumers' lease; a killed one's rows return then
  double drain_timeout_s = 300;       // after the producers stopped
  std::string worker_exe;             // default /proc/self/exe
  std::vector<std::string> worker_args = {"dock-worker"};
};

// Runs the soak; returns the report (also when invariants failed: see above).
nlohmann::json run_dock_soak(const DockSoakOptions& options);

struct DockSoakWorkerOptions {
  std::string role;  // soak-producer | soak-consumer
  std::string controller;
  std::string consumer;     // consumer name (consumers)
  int64_t incarnation = 0;  // unique per producer process: the high half of its row keys
  int64_t max_row_bytes = int64_t{1} << 20;
  uint64_t seed = 1;
  int batch_rows = 8;
  double lease_s = 10;
};
int run_dock_soak_worker(const DockSoakWorkerOptions& options);

}  // namespace aspen::bench
