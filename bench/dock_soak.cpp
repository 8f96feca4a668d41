#include "bench/dock_soak.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <thread>

#include "aspen/dock/controller_protocol.h"
#include "aspen/dock/warehouse_protocol.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"
#include "bench/imports.h"
#include "bench/dock_soak_ledger.h"
#include "bench/worker_process.h"

namespace aspen::bench {
namespace {

using SoakClock = std::chrono::steady_clock;

struct SoakWorker {
  WorkerProcess process;
  bool producer = false;
  int consumer = -1;  // consumer name index
  WarehouseId warehouse = kNoWarehouse;
  bool ready = false, stopped = false, done = false;
  bool exited = false;  // reaped after "done" (consumers only)
  int status = 0;
  std::string pending;  // a line not yet complete
  SoakClock::time_point spawned;
};

// Supervises the workers, holds the controller (and the ledger its hooks feed), and
// runs the phases: start, soak with kills, stop, drain, check.
class SoakDriver {
 public:
  explicit SoakDriver(const DockSoakOptions& options);
  ~SoakDriver();
  nlohmann::json run();

 private:
  void spawn_producer();
  void spawn_consumer(int name);
  // Starts `args` after the worker arguments; consumer: its name's index, -1 for a producer.
  void start_worker(const std::vector<std::string>& args, int consumer);
  // Reads every worker's lines for up to timeout_ms; aspen::Error if one died on its own.
  void pump(int timeout_ms);
  // Everything the worker has written so far (all of it, once it is dead).
  void read_lines(SoakWorker& worker);
  void handle_line(SoakWorker& worker, const std::string& line);
  // SIGKILLs one ready worker and starts its replacement; false when none was ready.
  bool kill_one(std::mt19937_64& rng);
  void send(SoakWorker& worker, const char* line);
  // Pumps until `done()` or timeout_s; aspen::Error naming `what` on timeout.
  template <typename Done>
  void pump_until(Done done, double timeout_s, const std::string& what);
  nlohmann::json check_warehouses(std::vector<std::string>& violations);
  int64_t controller_count(const char* key) { return controller_->metrics()[key].get<int64_t>(); }

  const DockSoakOptions options_;
  const std::string exe_;
  const std::string token_;
  std::vector<std::string> names_;
  SoakLedger ledger_;  // before the controller: its hooks run until the controller dies
  std::shared_ptr<DockController> controller_;
  std::unique_ptr<ControllerService> service_;
  std::vector<std::unique_ptr<SoakWorker>> workers_;  // live ones
  int64_t next_incarnation_ = 1;
  int64_t producer_kills_ = 0, consumer_kills_ = 0, spawned_ = 0;
};

std::vector<std::string> soak_consumer_names(int count) {
  std::vector<std::string> names;
  for (int i = 0; i < count; ++i) names.push_back("c" + std::to_string(i));
  return names;
}

DockSchema soak_schema(const std::vector<std::string>& names) {
  std::vector<ConsumerSpec> consumers;
  for (const std::string& name : names) consumers.push_back({name, {"data"}});
  return DockSchema({{"data", torch::kUInt8, ColumnKind::kPerRow}}, consumers);
}

std::string soak_token() {
  std::random_device device;
  return "soak-" + std::to_string(device()) + std::to_string(device());
}

void check_soak_options(const DockSoakOptions& o) {
  check_input(o.soak_s > 0, "soak of " + std::to_string(o.soak_s) + " s", "--soak",
              "a positive number of seconds");
  check_input(o.producers >= 1 && o.consumers >= 1,
              std::to_string(o.producers) + " producers, " + std::to_string(o.consumers) +
                  " consumers",
              "--producers/--consumers", "at least one of each");
  check_input(o.consumer_names >= 1 && o.consumer_names <= o.consumers &&
                  o.consumer_names <= DockSchema::kMaxConsumers,
              std::to_string(o.consumer_names) + " consumer names for " +
                  std::to_string(o.consumers) + " consumer processes",
              "--consumer-names", "between 1 and the number of consumer processes (and <= 64)");
  check_input(o.max_row_bytes >= 1 && o.max_row_bytes <= (int64_t{1} << 28),
              std::to_string(o.max_row_bytes) + " bytes", "--max-row-bytes", "1 .. 256 MiB");
  check_input(o.kill_every_s > 0, std::to_string(o.kill_every_s) + " s", "--kill-every",
              "a positive mean interval");
  check_input(o.batch_rows >= 1, std::to_string(o.batch_rows), "--batch", "at least 1 row");
  check_input(o.lease_s > 0 && o.drain_timeout_s > 0, "non-positive lease or drain timeout",
              "dock soak");
}

SoakDriver::SoakDriver(const DockSoakOptions& options)
    : options_(options),
      exe_(options.worker_exe.empty() ? self_executable() : options.worker_exe),
      token_(soak_token()),
      names_(soak_consumer_names(options.consumer_names)),
      ledger_(names_) {
  DockControllerOptions controller_options;
  // A few batches per producer in flight: enough to keep consumers busy, and the
  // producers' warehouses hold at most this many rows (~0.5 MB each on average).
  controller_options.capacity_rows =
      std::max<int64_t>(64, int64_t{4} * options.batch_rows * options.producers);
  controller_options.hooks = ledger_.hooks();
  controller_ = std::make_shared<DockController>(soak_schema(names_), controller_options);
  service_ = std::make_unique<ControllerService>(controller_,
                                                 ZmqServiceOptions{"tcp://127.0.0.1:*", token_});
  // The token travels in the environment, not on the command line (ps shows argv).
  setenv("ASPEN_DOCK_TOKEN", token_.c_str(), 1);
}

SoakDriver::~SoakDriver() {
  for (auto& worker : workers_) {
    if (!worker->exited) {  // a reaped pid may belong to someone else by now
      kill(worker->process.pid, SIGKILL);
      waitpid(worker->process.pid, nullptr, 0);
    }
    close(worker->process.to);
    close(worker->process.from);
  }
  service_.reset();  // joins the service threads before the controller and ledger go
}

void SoakDriver::spawn_producer() {
  std::vector<std::string> args = options_.worker_args;
  for (const std::string& a :
       {std::string("--role"), std::string("soak-producer"), std::string("--controller"),
        service_->endpoint(), std::string("--incarnation"), std::to_string(next_incarnation_++),
        std::string("--max-row-bytes"), std::to_string(options_.max_row_bytes),
        std::string("--seed"), std::to_string(options_.seed), std::string("--batch"),
        std::to_string(options_.batch_rows)}) {
    args.push_back(a);
  }
  start_worker(args, /*consumer=*/-1);
}

void SoakDriver::spawn_consumer(int name) {
  std::vector<std::string> args = options_.worker_args;
  for (const std::string& a :
       {std::string("--role"), std::string("soak-consumer"), std::string("--controller"),
        service_->endpoint(), std::string("--consumer"), names_[name],
        std::string("--max-row-bytes"), std::to_string(options_.max_row_bytes),
        std::string("--seed"), std::to_string(options_.seed), std::string("--batch"),
        std::to_string(options_.batch_rows), std::string("--lease"),
        std::to_string(options_.lease_s)}) {
    args.push_back(a);
  }
  start_worker(args, name);
}

void SoakDriver::start_worker(const std::vector<std::string>& args, int consumer) {
  auto worker = std::make_unique<SoakWorker>();
  worker->process = spawn_worker_process(exe_, args);
  worker->producer = consumer < 0;
  worker->consumer = consumer;
  worker->spawned = SoakClock::now();
  fcntl(worker->process.from, F_SETFL, O_NONBLOCK);
  workers_.push_back(std::move(worker));
  spawned_ += 1;
}

void SoakDriver::send(SoakWorker& worker, const char* line) {
  // EPIPE (a worker that just exited) is ignored: SIGPIPE is ignored in the driver.
  const std::string text = std::string(line) + "\n";
  [[maybe_unused]] ssize_t n = write(worker.process.to, text.data(), text.size());
}

void SoakDriver::handle_line(SoakWorker& worker, const std::string& line) {
  std::istringstream in(line);
  std::string word;
  in >> word;
  if (word == "ok") {
    std::vector<RowId> rows;
    RowId id;
    while (in >> id) rows.push_back(id);
    ledger_.journal_ok(worker.consumer, rows);
  } else if (word == "bad") {
    RowId id = 0;
    in >> id;
    std::string what;
    std::getline(in, what);
    ledger_.journal_bad(worker.consumer, id, what);
  } else if (word == "ready") {
    worker.ready = true;
    if (worker.producer) in >> worker.warehouse;
  } else if (word == "stopped") {
    worker.stopped = true;
  } else if (word == "done") {
    worker.done = true;
  }
}

void SoakDriver::read_lines(SoakWorker& worker) {
  char buffer[65536];
  while (true) {
    const ssize_t n = read(worker.process.from, buffer, sizeof buffer);
    if (n > 0) {
      worker.pending.append(buffer, static_cast<size_t>(n));
      size_t end;
      while ((end = worker.pending.find('\n')) != std::string::npos) {
        handle_line(worker, worker.pending.substr(0, end));
        worker.pending.erase(0, end + 1);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // EAGAIN: nothing more for now (for a dead worker: nothing more at all, since
    // what it wrote before it died is in the pipe); 0: end of file.
    return;
  }
}

void SoakDriver::pump(int timeout_ms) {
  std::vector<pollfd> fds;
  // A reaped worker's pipe is at end of file for good: left out (-1), or poll would
  // return at once every time.
  for (auto& worker : workers_) {
    fds.push_back({worker->exited ? -1 : worker->process.from, POLLIN, 0});
  }
  poll(fds.data(), fds.size(), timeout_ms);
  for (size_t i = 0; i < workers_.size(); ++i) {
    SoakWorker& worker = *workers_[i];
    if (fds[i].revents != 0) read_lines(worker);
    if (worker.exited) continue;
    int status = 0;
    if (waitpid(worker.process.pid, &status, WNOHANG) == worker.process.pid) {
      read_lines(worker);
      if (worker.done) {  // a consumer told to stop: checked by the caller
        worker.exited = true;
        worker.status = status;
        continue;
      }
      const std::string role = worker.producer ? "producer" : "consumer " + names_[worker.consumer];
      throw Error(role + " (pid " + std::to_string(worker.process.pid) + ") died on its own: " +
                      (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                         : "signal " + std::to_string(WTERMSIG(status))),
                  "dock soak", "its error is on stderr above");
    }
    if (!worker.ready && seconds_since(worker.spawned) > 120) {
      throw Error("a worker did not start within 120 s", "dock soak");
    }
  }
}

template <typename Done>
void SoakDriver::pump_until(Done done, double timeout_s, const std::string& what) {
  const auto start = SoakClock::now();
  while (!done()) {
    if (seconds_since(start) > timeout_s) {
      throw Error(what + " did not happen within " + std::to_string(timeout_s) + " s",
                  "dock soak", "live rows: " + std::to_string(controller_count("live_rows")));
    }
    pump(20);
  }
}

bool SoakDriver::kill_one(std::mt19937_64& rng) {
  // Producers and consumers in turn, a random ready one of the kind each time: both
  // kinds of death happen in any run with two kills or more.
  const bool kill_producer = (producer_kills_ + consumer_kills_) % 2 == 0;
  std::vector<size_t> ready;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i]->ready && workers_[i]->producer == kill_producer) ready.push_back(i);
  }
  if (ready.empty()) return false;  // all of that kind are starting: retried next tick
  const size_t index = ready[std::uniform_int_distribution<size_t>(0, ready.size() - 1)(rng)];
  std::unique_ptr<SoakWorker> victim = std::move(workers_[index]);
  workers_.erase(workers_.begin() + static_cast<std::ptrdiff_t>(index));
  kill(victim->process.pid, SIGKILL);
  waitpid(victim->process.pid, nullptr, 0);
  read_lines(*victim);  // its journal lines written before it died still count
  close(victim->process.to);
  close(victim->process.from);
  if (victim->producer) {
    producer_kills_ += 1;
    ledger_.record_lost(victim->warehouse, controller_->retire_warehouse(victim->warehouse));
    spawn_producer();
  } else {
    consumer_kills_ += 1;
    spawn_consumer(victim->consumer);
  }
  return true;
}

nlohmann::json SoakDriver::check_warehouses(std::vector<std::string>& violations) {
  const std::vector<std::string> endpoints = controller_->warehouse_endpoints();
  int64_t orphans = 0, rows_held = 0, bytes_held = 0, checked = 0;
  for (auto& worker : workers_) {
    if (!worker->producer) continue;
    RemoteWarehouse warehouse(RpcClientOptions{endpoints.at(worker->warehouse), token_, 60.0});
    const int64_t before = warehouse.metrics()["rows_held"].get<int64_t>();
    if (before > 0) {
      // Every row is retired by now, so these are rows whose erase never came: the
      // consumer that retired them was killed before its erase, or its erase timed
      // out (the warehouse was slow, or this one was busy). Not a dock invariant:
      // erasing is the acking client's job (TransferDock); here the owner sweeps.
      orphans += before;
      warehouse.erase(ledger_.rows_owned_by(worker->warehouse));
    }
    const nlohmann::json after = warehouse.metrics();
    rows_held += after["rows_held"].get<int64_t>();
    bytes_held += after["bytes_held"].get<int64_t>();
    checked += 1;
  }
  if (rows_held != 0 || bytes_held != 0) {
    violations.push_back("surviving warehouses hold " + std::to_string(rows_held) + " rows, " +
                         std::to_string(bytes_held) + " bytes after every row retired");
  }
  return {{"checked", checked},
          {"rows_held", rows_held},
          {"bytes_held", bytes_held},
          {"orphans_swept", orphans}};
}

nlohmann::json SoakDriver::run() {
  for (int p = 0; p < options_.producers; ++p) spawn_producer();
  for (int c = 0; c < options_.consumers; ++c) spawn_consumer(c % options_.consumer_names);
  pump_until(
      [&] {
        for (auto& w : workers_) {
          if (!w->ready) return false;
        }
        return true;
      },
      180, "every worker's start");
  std::cerr << "dock soak: " << workers_.size() << " workers ready, soaking for "
            << options_.soak_s << " s\n";

  // Soak: kills at exponential intervals until the deadline.
  const auto start = SoakClock::now();
  std::mt19937_64 rng(options_.seed);
  std::exponential_distribution<double> interval(1.0 / options_.kill_every_s);
  double next_kill = interval(rng);
  double next_progress = 30;
  while (seconds_since(start) < options_.soak_s) {
    pump(20);
    const double now = seconds_since(start);
    if (now >= next_kill && kill_one(rng)) next_kill = now + interval(rng);
    if (now >= next_progress) {
      std::cerr << "dock soak: " << static_cast<int>(now) << " s, "
                << controller_count("rows_retired") << " rows retired, "
                << producer_kills_ + consumer_kills_ << " kills\n";
      next_progress += 30;
    }
  }
  const double soak_elapsed = seconds_since(start);

  // Stop producing, then drain: every row not lost is consumed by every consumer.
  for (auto& w : workers_) {
    if (w->producer) send(*w, "stop");
  }
  pump_until(
      [&] {
        for (auto& w : workers_) {
          if (w->producer && !w->stopped) return false;
        }
        return true;
      },
      120, "every producer's stop");
  pump_until([&] { return controller_count("live_rows") == 0; }, options_.drain_timeout_s,
             "the drain");
  for (auto& w : workers_) {
    if (!w->producer) send(*w, "stop");
  }
  pump_until(
      [&] {
        for (auto& w : workers_) {
          if (!w->producer && !w->done) return false;
        }
        return true;
      },
      120, "every consumer's stop");
  for (auto it = workers_.begin(); it != workers_.end();) {
    SoakWorker& w = **it;
    if (w.producer) {
      ++it;
      continue;
    }
    if (!w.exited) waitpid(w.process.pid, &w.status, 0);
    close(w.process.to);
    close(w.process.from);
    check_input(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0, "a consumer failed at exit",
                "dock soak");
    it = workers_.erase(it);
  }
  // A killed consumer's lease ends by lease_s; none may outlive that.
  const auto grace = SoakClock::now();
  while (controller_count("open_leases") > 0 && seconds_since(grace) < options_.lease_s + 5) {
    pump(50);
  }
  const double drain_elapsed = seconds_since(start);

  std::vector<std::string> violations;
  nlohmann::json warehouses = check_warehouses(violations);
  for (auto& w : workers_) close(w->process.to);  // producers exit at end of input
  for (auto& w : workers_) {
    int status = 0;
    waitpid(w->process.pid, &status, 0);
    close(w->process.from);
    check_input(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a producer failed at exit",
                "dock soak");
  }
  workers_.clear();

  const nlohmann::json controller = controller_->metrics();
  nlohmann::json report = ledger_.verdict(violations);
  const int64_t leaked_leases = controller["open_leases"].get<int64_t>();
  const int64_t live_rows = controller["live_rows"].get<int64_t>();
  if (leaked_leases != 0) violations.push_back("leaked leases = " + std::to_string(leaked_leases));
  if (live_rows != 0) violations.push_back("controller live rows = " + std::to_string(live_rows));
  if (controller["rows_allocated"] != report["rows_produced"] ||
      controller["rows_lost"] != report["rows_lost"]) {
    violations.push_back("the controller's counts differ from the ledger's");
  }
  const double bytes_moved = report["bytes_moved"].get<double>();
  report["soak_s"] = options_.soak_s;
  report["elapsed_s"] = drain_elapsed;
  report["soak_elapsed_s"] = soak_elapsed;
  report["seed"] = options_.seed;
  report["processes"] = {{"producers", options_.producers},
                         {"consumers", options_.consumers},
                         {"consumer_names", names_},
                         {"started", spawned_}};
  report["max_row_bytes"] = options_.max_row_bytes;
  report["kills"] = {{"producers", producer_kills_},
                     {"consumers", consumer_kills_},
                     {"total", producer_kills_ + consumer_kills_}};
  report["mb_moved_per_s"] = bytes_moved / 1e6 / drain_elapsed;
  report["leaked_leases"] = leaked_leases;
  report["controller"] = {{"live_rows", live_rows},
                          {"rows_allocated", controller["rows_allocated"]},
                          {"rows_lost", controller["rows_lost"]},
                          {"leases_expired", controller["leases_expired"]},
                          {"warehouses_retired", controller["warehouses_retired"]}};
  report["warehouses"] = warehouses;
  report["violations"] = violations;
  report["invariants_hold"] = violations.empty();
  return report;
}

}  // namespace

nlohmann::json run_dock_soak(const DockSoakOptions& options) {
  check_soak_options(options);
  // A worker that exits between our check and our write must not kill the driver.
  signal(SIGPIPE, SIG_IGN);
  SoakDriver driver(options);
  return driver.run();
}

}  // namespace aspen::bench
