// DockController: the metadata half of a TransferDock. Per row it keeps the row's
// info (group, token length, policy version), which warehouse holds each column
// (kNoWarehouse = not ready), a consumed bit and a leased bit per consumer. Column
// data never reaches it. It implements ControllerApi in-process; the ZeroMQ
// controller service wraps the same object.
//
// Contract:
// - allocate() reserves capacity; at capacity it blocks (back-pressure), never drops.
//   Allocated rows count against capacity until they retire.
// - A row is claimable by consumer c once every column c needs is published and c
//   has neither consumed nor leased it. claim() is atomic: one critical section
//   selects and leases the rows, so a row goes to exactly one claimant per consumer.
//   It returns >= min_rows rows or, after timeout_s, nothing (timed_out = true).
// - Selection: rows ordered by id (allocation order), oldest or newest first, inside
//   the version window; with whole_groups a group is taken only when all its
//   group_size rows are claimable and fit under max_rows. With balance_ranks = d > 1
//   the claimed rows are split by tokens (token_balance.h) and the imbalance reported.
// - A claim is a lease: ack() before lease_s marks the rows consumed; after the
//   deadline (swept at the start of every call and while claimants wait) the rows go
//   back to the pool and a late ack() returns acknowledged = false. A consumer that
//   dies therefore loses nothing.
// - A row retires when every consumer has acked it; ack() returns it so the caller
//   can free it in the warehouses, and capacity is released.
// Thread safety: all methods are thread-safe. Locking: mutex_ guards every member
// below it; ready_cv_ (rows became claimable, a lease ended, close) and space_cv_
// (capacity freed, close) wait on mutex_. No call blocks while holding any other lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "aspen/dock/dock_api.h"

namespace aspen {

struct DockControllerOptions {
  int64_t capacity_rows = 4096;  // live (allocated, not retired) rows at most
};

class DockController : public ControllerApi {
 public:
  explicit DockController(DockSchema schema, DockControllerOptions options = {});
  ~DockController() override;

  const DockSchema& schema() const override { return schema_; }
  WarehouseId register_warehouse(const std::string& endpoint) override;
  std::vector<std::string> warehouse_endpoints() override;
  std::vector<RowId> allocate(const std::vector<RowInfo>& rows, double timeout_s) override;
  void publish(const std::vector<RowId>& rows, const std::vector<std::string>& columns,
               WarehouseId where) override;
  Claim claim(const std::string& consumer, const ClaimOptions& options) override;
  AckResult ack(int64_t lease) override;
  bool release(int64_t lease) override;
  nlohmann::json metrics() override;

  // Non-blocking variants for services that must not block their I/O thread:
  // nullopt where the blocking call would have waited.
  std::optional<std::vector<RowId>> try_allocate(const std::vector<RowInfo>& rows);
  std::optional<Claim> try_claim(const std::string& consumer, const ClaimOptions& options);

  // Wakes every waiter and makes later waits return at once (timed out / empty).
  void close();

 private:
  using Clock = std::chrono::steady_clock;
  struct RowState {
    RowInfo info;
    std::vector<WarehouseId> where;  // [column]
    uint64_t consumed = 0;           // bit per consumer
    uint64_t leased = 0;             // bit per consumer
  };
  struct Lease {
    int consumer = 0;
    std::vector<RowId> rows;
    Clock::time_point deadline;
  };
  struct ConsumerStats {
    int64_t claims = 0, rows_claimed = 0, timed_out = 0, balanced_claims = 0;
    double latency_s_total = 0, latency_s_max = 0, wait_s = 0;
    double imbalance_total = 0, imbalance_max = 0;
  };

  void validate_claim(const ClaimOptions& options) const;
  std::vector<RowId> reserve_locked(const std::vector<RowInfo>& rows);
  std::optional<Claim> claim_locked(int consumer, const ClaimOptions& options);
  std::vector<RowId> select_locked(int consumer, const ClaimOptions& options) const;
  void expire_leases_locked(Clock::time_point now);
  void return_rows_locked(const Lease& lease);
  bool ready_for_locked(const RowState& row, int consumer) const;
  void record_claim_locked(int consumer, const Claim& claim, double latency_s, double wait_s);

  const DockSchema schema_;
  const DockControllerOptions options_;
  const uint64_t all_consumers_mask_;

  std::mutex mutex_;
  std::condition_variable ready_cv_;
  std::condition_variable space_cv_;
  bool closed_ = false;                        // guarded by mutex_
  std::unordered_map<RowId, RowState> rows_;   // guarded by mutex_
  std::vector<std::set<RowId>> claimable_;     // [consumer]; guarded by mutex_
  std::unordered_map<int64_t, Lease> leases_;  // guarded by mutex_
  std::set<std::pair<Clock::time_point, int64_t>> lease_deadlines_;     // guarded by mutex_
  std::vector<std::string> warehouses_;                                 // guarded by mutex_
  RowId next_row_ = 1;                                                  // guarded by mutex_
  int64_t next_lease_ = 1;                                              // guarded by mutex_
  int64_t rows_allocated_ = 0, rows_retired_ = 0, leases_expired_ = 0;  // guarded by mutex_
  double producer_wait_s_ = 0;                                          // guarded by mutex_
  std::vector<ConsumerStats> stats_;  // [consumer]; guarded by mutex_
};

}  // namespace aspen
