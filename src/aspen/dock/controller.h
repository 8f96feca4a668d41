// DockController: the metadata half of a TransferDock. Per row it keeps the row's
// info (group, token length, policy version), which warehouse holds each column
// (kNoWarehouse = not ready), a consumed bit and a leased bit per consumer. Column
// data never reaches it. It implements ControllerApi in-process; the ZeroMQ
// controller service wraps the same object.
//
// Contract:
// - allocate() reserves capacity; at capacity it blocks (back-pressure), never drops.
//   Allocated rows count against capacity until they retire (or are discarded).
// - A row is claimable by consumer c once every column c needs is published and c
//   has neither consumed nor leased it. claim() is atomic: one critical section
//   selects and leases the rows, so a row goes to exactly one claimant per consumer.
//   It returns >= min_rows rows or, after timeout_s, nothing (timed_out = true).
// - Selection: rows ordered by id (allocation order), oldest or newest first, inside
//   the version window, the groups filter and the target filter (target >= 0: rows
//   dispatched to it or to none); with whole_groups a group is taken only when all its
//   group_size rows are claimable and fit under max_rows. With balance_ranks = d > 1
//   the claimed rows are split by tokens (token_balance.h) and the imbalance reported.
// - Required window (required_through_version set; whole_groups required): among the
//   live rows c has neither consumed nor leased, grouped by group_id, a group is
//   required when its smallest row version is <= required_through_version (the
//   version window does not excuse it; the groups and target filters do: a group the
//   claim could never take is not required of it). A required group that is not
//   claimable (rows missing, unpublished, outside the window) is pending. The claim
//   takes every claimable required group, even beyond max_rows (a staleness bound
//   outranks the batch size), then other claimable groups by (smallest version,
//   smallest row id) while taken + group_size + pending_required_rows <= max_rows, so
//   each pending group keeps its room in the batch. oldest_first does not apply.
//   complete_window: success only with no pending group and >= min_rows taken; else
//   success with >= min_rows. pending_required_rows and ready_rows_left are reported
//   on every answer, an empty or timed-out one included (as of the last check; an
//   answer that took nothing counts every claimable row as left).
// - A claim is a lease: ack() before lease_s (renew() moves the deadline) marks the
//   rows consumed; after the deadline (swept at the start of every call and while
//   claimants wait) the rows go back to the pool and a late ack() returns
//   acknowledged = false. A consumer that dies therefore loses nothing.
// - Rows that go back to the pool (lease expired, or release()) lose their dispatch
//   target (target = -1): a target is bound to a live claimant, and a row its
//   claimant gave up must be claimable by any instance.
// - A row retires when every consumer has acked it; ack() returns it so the caller
//   can free it in the warehouses, and capacity is released. discard() retires rows
//   at once, consumed or not, and takes them out of the leases holding them (whose
//   ack then succeeds without them).
// - Warehouse death: allocate(rows, timeout, owner) records the producer's warehouse
//   as the rows' owner (default kNoWarehouse: unowned). retire_warehouse(w) retires
//   at once every live row with a column held in w or owned by w (published or not:
//   a row allocated but not yet published dies with its producer too), takes them
//   out of the leases holding them (as discard() does: those leases' ack succeeds
//   without them, and the rows never count as consumed by it), frees their capacity
//   and counts them in metrics as rows_lost. w stays dead: its endpoint reads "",
//   allocations owned by it and publishes to it throw aspen::Error (a message the
//   dead process sent before it died may still arrive), retiring it again returns
//   nothing; an id never registered is an aspen::Error. A consumer that dies loses nothing (its lease expires, see above).
// - Consumption is the controller's ack: a row counts as consumed by consumer c
//   exactly when an ack() of a lease holding it returns acknowledged = true; an ack
//   after expiry returns false and consumes nothing, so consumption stays exactly
//   once per consumer however often a row is claimed and processed. A consumer that
//   must prove what it consumed journals the lease's rows before acking and the
//   auditor takes consumption from the controller (options.hooks.acked), never from
//   the consumer's own record of its ack: a kill between the ack and the consumer's
//   next write then cannot fake a loss or a duplicate (bench/dock_soak.h).
// - options.hooks (optional) report allocations (ids, infos, owner) and acks
//   (consumer index, the rows the ack marked consumed) as they happen: an audit
//   trail. They run under mutex_, in ledger order, so they must be quick and must
//   not call the controller.
// - update_info() replaces tokens and version only (the infos' target is ignored: a
//   claimant's copy of it is stale once its lease expired); readiness does not depend
//   on them, so the claimable sets stay as they are, and claimants waiting on a
//   version window are woken. retarget() moves only rows no consumer holds a lease on.
// - The status board is a map key -> (value, time posted); statuses() reports each
//   value's age at the call, by the controller's clock (options.clock).
// Thread safety: all methods are thread-safe. Locking: mutex_ guards every member
// below it; ready_cv_ (rows became claimable, versions/targets changed, rows
// discarded or lost, a lease ended, close) and space_cv_ (capacity freed, close) wait on
// mutex_. No call blocks while holding any other lock.
#pragma once

#include <chrono>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "aspen/dock/dock_api.h"
#include "aspen/dock/imports.h"
#include "aspen/util/clock.h"
#include "aspen/util/mutex.h"

namespace aspen::dock {

// The audit trail of the ledger (see the contract above); either may be empty.
struct DockLedgerHooks {
  std::function<void(const std::vector<RowId>& rows, const std::vector<RowInfo>& infos,
                     WarehouseId owner)>
      allocated;
  std::function<void(int consumer, const std::vector<RowId>& rows)> acked;
};

struct DockControllerOptions {
  int64_t capacity_rows = 4096;  // live (allocated, not retired) rows at most
  DockLedgerHooks hooks{};  // {}: DockControllerOptions{n} stays warning-free
  // The ledger's time: lease deadlines and status-board ages (util/clock.h). Null: the
  // machine's steady clock. The simulator passes a ManualClock; it must outlive the
  // controller. Blocking waits (timeout_s) are real waits whatever the clock.
  const TimeSource* clock = nullptr;
};

class DockController : public ControllerApi {
 public:
  explicit DockController(DockSchema schema, DockControllerOptions options = {});
  ~DockController() override;

  const DockSchema& schema() const override { return schema_; }
  WarehouseId register_warehouse(const std::string& endpoint) override EXCLUDES(mutex_);
  std::vector<std::string> warehouse_endpoints() override EXCLUDES(mutex_);
  std::vector<RowId> allocate(const std::vector<RowInfo>& rows, double timeout_s,
                              WarehouseId owner = kNoWarehouse) override EXCLUDES(mutex_);
  void publish(const std::vector<RowId>& rows, const std::vector<std::string>& columns,
               WarehouseId where, const std::vector<RowInfo>& infos = {}) override
      EXCLUDES(mutex_);
  Claim claim(const std::string& consumer, const ClaimOptions& options) override EXCLUDES(mutex_);
  AckResult ack(int64_t lease) override EXCLUDES(mutex_);
  bool release(int64_t lease) override EXCLUDES(mutex_);
  bool renew(int64_t lease, double lease_s) override EXCLUDES(mutex_);
  void update_info(const std::vector<RowId>& rows, const std::vector<RowInfo>& infos) override
      EXCLUDES(mutex_);
  std::vector<RetiredRow> discard(const std::vector<RowId>& rows, bool unleased_only = false) override
      EXCLUDES(mutex_);
  std::vector<RetiredRow> retire_warehouse(WarehouseId warehouse) override EXCLUDES(mutex_);
  int64_t retarget(int32_t from, int32_t to) override EXCLUDES(mutex_);
  ConsumerBacklog backlog(const std::string& consumer) override EXCLUDES(mutex_);
  void post_status(const std::string& key, const std::string& value) override EXCLUDES(mutex_);
  std::map<std::string, StatusEntry> statuses(const std::string& prefix) override EXCLUDES(mutex_);
  nlohmann::json metrics() override EXCLUDES(mutex_);

  // Non-blocking variants for services that must not block their I/O thread:
  // nullopt where the blocking call would have waited.
  std::optional<std::vector<RowId>> try_allocate(const std::vector<RowInfo>& rows,
                                                 WarehouseId owner = kNoWarehouse) EXCLUDES(mutex_);
  std::optional<Claim> try_claim(const std::string& consumer, const ClaimOptions& options)
      EXCLUDES(mutex_);

  // Wakes every waiter and makes later waits return at once (timed out / empty).
  void close() EXCLUDES(mutex_);

 private:
  using TimePoint = TimeSource::TimePoint;  // of the ledger clock (options.clock)
  struct RowState {
    RowInfo info;
    std::vector<WarehouseId> where;  // [column]
    WarehouseId owner = kNoWarehouse;
    uint64_t consumed = 0;           // bit per consumer
    uint64_t leased = 0;             // bit per consumer
  };
  struct Lease {
    int consumer = 0;
    std::vector<RowId> rows;
    TimePoint deadline;
  };
  // What select_locked chose, and the required-window counts reported with it.
  struct Selection {
    std::vector<RowId> rows;
    bool satisfied = false;  // the claim may be answered with `rows`
    int64_t pending_required_rows = 0;
    int64_t ready_rows_left = 0;
  };
  // One group's rows a consumer has neither consumed nor leased (required window).
  struct GroupTally {
    int32_t size = 1;  // group_size
    int64_t min_version = std::numeric_limits<int64_t>::max();
    RowId first_row = std::numeric_limits<RowId>::max();
    std::vector<RowId> ready;  // claimable, inside the version window, in id order
    bool claimable() const { return static_cast<int64_t>(ready.size()) == size; }
  };
  struct StatusPost {
    std::string value;
    TimePoint posted;
  };
  struct ConsumerStats {
    int64_t claims = 0, rows_claimed = 0, timed_out = 0, balanced_claims = 0;
    double latency_s_total = 0, latency_s_max = 0, wait_s = 0;
    double imbalance_total = 0, imbalance_max = 0;
  };

  // Whether the claim names a required window (required_through_version).
  static bool requires_window(const ClaimOptions& options);
  void validate_claim(const ClaimOptions& options) const;
  std::vector<RowId> reserve_locked(const std::vector<RowInfo>& rows, WarehouseId owner)
      REQUIRES(mutex_);
  void check_warehouse_locked(WarehouseId where, const std::string& context) const REQUIRES(mutex_);
  std::optional<Claim> claim_locked(int consumer, const ClaimOptions& options, Selection& selection)
      REQUIRES(mutex_);
  // Row selection (controller_selection.cpp).
  Selection select_locked(int consumer, const ClaimOptions& options) const REQUIRES(mutex_);
  Selection select_window_locked(int consumer, const ClaimOptions& options) const REQUIRES(mutex_);
  std::vector<GroupTally> tally_groups_locked(int consumer, const ClaimOptions& options) const
      REQUIRES(mutex_);
  Claim empty_claim(int consumer, const Selection& selection) const;
  RetiredRow retire_locked(std::unordered_map<RowId, RowState>::iterator row) REQUIRES(mutex_);
  void drop_from_leases_locked(const std::unordered_set<RowId>& rows) REQUIRES(mutex_);
  void expire_leases_locked(TimePoint now) REQUIRES(mutex_);
  void return_rows_locked(const Lease& lease) REQUIRES(mutex_);
  bool ready_for_locked(const RowState& row, int consumer) const REQUIRES(mutex_);
  void record_claim_locked(int consumer, const Claim& claim, double latency_s, double wait_s)
      REQUIRES(mutex_);

  const DockSchema schema_;
  const DockControllerOptions options_;
  const uint64_t all_consumers_mask_;
  const TimeSource& clock_;

  Mutex mutex_;
  CondVar ready_cv_;
  CondVar space_cv_;
  bool closed_ GUARDED_BY(mutex_) = false;
  std::unordered_map<RowId, RowState> rows_ GUARDED_BY(mutex_);
  std::vector<std::set<RowId>> claimable_ GUARDED_BY(mutex_);  // [consumer]
  std::unordered_map<int64_t, Lease> leases_ GUARDED_BY(mutex_);
  std::set<std::pair<TimePoint, int64_t>> lease_deadlines_ GUARDED_BY(mutex_);
  std::vector<std::string> warehouses_ GUARDED_BY(mutex_);
  std::vector<bool> warehouse_dead_ GUARDED_BY(mutex_);  // [warehouse] retired
  RowId next_row_ GUARDED_BY(mutex_) = 1;
  int64_t next_lease_ GUARDED_BY(mutex_) = 1;
  int64_t rows_allocated_ GUARDED_BY(mutex_) = 0;
  int64_t rows_retired_ GUARDED_BY(mutex_) = 0;
  int64_t leases_expired_ GUARDED_BY(mutex_) = 0;
  int64_t rows_discarded_ GUARDED_BY(mutex_) = 0;
  int64_t rows_lost_ GUARDED_BY(mutex_) = 0;
  int64_t warehouses_retired_ GUARDED_BY(mutex_) = 0;
  double producer_wait_s_ GUARDED_BY(mutex_) = 0;
  std::map<std::string, StatusPost> statuses_ GUARDED_BY(mutex_);
  std::vector<ConsumerStats> stats_ GUARDED_BY(mutex_);  // [consumer]
};

}  // namespace aspen::dock
