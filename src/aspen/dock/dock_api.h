// The two service interfaces of a TransferDock and the transport that reaches them.
//   ControllerApi: metadata only (row allocation, ready bits, claims, leases).
//   WarehouseApi:  column tensors of the rows written on one process/node.
//   DockTransport: where the controller, the local warehouse and every other
//                  warehouse are. In-process (in_process_transport.h) it hands out
//                  the objects themselves, zero copy; cross-process
//                  (zmq_transport.h) it hands out ZeroMQ clients with the same API.
// Claim semantics (atomicity, leases, balanced partition) are documented on
// DockController (controller.h), the one implementation behind both transports.
// Thread safety: every implementation is safe to call from many threads.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/dock/imports.h"
#include "aspen/dock/schema.h"
#include "aspen/dock/weight_delta.h"
#include "aspen/parallel/weight_set.h"

namespace aspen::dock {

struct ClaimOptions {
  int64_t max_rows = 1;       // k: at most this many rows
  int64_t min_rows = 1;       // claim nothing unless at least this many are claimable
  double timeout_s = 0.0;     // wait up to this long for min_rows (0: do not wait)
  bool whole_groups = false;  // only complete groups (all group_size rows claimable)
  bool oldest_first = true;   // false: newest rows first (least stale)
  int64_t min_version = std::numeric_limits<int64_t>::min();  // policy-version window
  int64_t max_version = std::numeric_limits<int64_t>::max();
  // Only rows of these groups (sorted or not); empty: any group. A trainer that has
  // chosen its batch (e.g. by staleness) claims exactly those groups.
  std::vector<int64_t> groups;
  int balance_ranks = 1;  // d > 1: partition the rows by tokens across d ranks
  double lease_s = 60.0;  // rows not acked by then go back to the pool (renew() extends)
  // >= 0: only rows dispatched to this target (RowInfo::target) or to none (-1).
  // -1: any row, whatever its target.
  int32_t target = -1;
  // Staleness window of a trainer's batch (whole_groups required). When set, every
  // live group with version <= required_through_version that this consumer has neither
  // consumed nor leased MUST be in the batch: the claim takes all such groups that are
  // claimable first, then fills up to max_rows with other claimable whole groups in
  // (version, row id) order, leaving free one group's rows for each required group
  // that is not claimable yet (still being generated or scored). With
  // complete_window, the claim succeeds only when no required group is pending and
  // at least min_rows are taken (a whole batch); without, it returns what may be taken
  // now (a streaming part) and reports what is pending.
  int64_t required_through_version = std::numeric_limits<int64_t>::min();
  bool complete_window = true;
};

struct ClaimedRow {
  RowId id = 0;
  RowInfo info;
  std::vector<WarehouseId> locations;  // parallel to Claim::columns
};

struct Claim {
  int64_t lease = 0;  // 0: nothing claimed
  std::string consumer;
  std::vector<std::string> columns;  // the consumer's columns
  std::vector<ClaimedRow> rows;
  std::vector<std::vector<RowId>> ranks;  // per rank when balance_ranks > 1, else empty
  double imbalance = 0.0;                 // max/mean - 1 of rank token loads
  bool timed_out = false;                 // waited timeout_s without min_rows claimable
  // With required_through_version: rows of required groups not claimable yet, and
  // claimable rows the claim left (the window or max_rows kept them out).
  int64_t pending_required_rows = 0;
  int64_t ready_rows_left = 0;
  bool empty() const { return rows.empty(); }
  // The claimed rows' ids, in claim order.
  std::vector<RowId> row_ids() const {
    std::vector<RowId> ids;
    ids.reserve(rows.size());
    for (const ClaimedRow& row : rows) ids.push_back(row.id);
    return ids;
  }
};

// A row every consumer has consumed: its data may be freed where it lives.
struct RetiredRow {
  RowId id = 0;
  std::vector<WarehouseId> warehouses;  // distinct warehouses holding its columns
};

// What the controller holds for one consumer: live rows it has not consumed.
struct ConsumerBacklog {
  int64_t rows = 0;         // neither consumed nor leased by the consumer
  int64_t groups = 0;       // distinct groups among those rows
  int64_t ready_rows = 0;   // ... of which claimable now
  int64_t leased_rows = 0;  // leased by the consumer, not yet acked
};

// A value posted on the controller's status board, with its age when read.
struct StatusEntry {
  std::string value;   // opaque to the controller (JSON by convention)
  double age_s = 0.0;  // seconds since it was posted, by the controller's clock
};

struct AckResult {
  bool acknowledged = false;  // false: unknown or expired lease (rows went back)
  std::vector<RetiredRow> retired;
};

class ControllerApi {
 public:
  virtual ~ControllerApi() = default;
  virtual const DockSchema& schema() const = 0;
  // Registers a warehouse reachable at `endpoint` ("" in-process); returns its id.
  virtual WarehouseId register_warehouse(const std::string& endpoint) = 0;
  virtual std::vector<std::string> warehouse_endpoints() = 0;
  // Reserves one row per info, blocking while the dock is at capacity
  // (back-pressure). Returns the new ids, or an empty vector after timeout_s.
  // `owner`: the warehouse of the producer allocating them (kNoWarehouse: unowned);
  // retire_warehouse(owner) loses the rows with it even before they are published.
  // Overriders repeat the default (defaults bind to the static type).
  virtual std::vector<RowId> allocate(const std::vector<RowInfo>& rows, double timeout_s,
                                      WarehouseId owner = kNoWarehouse) = 0;
  // Marks `columns` of `rows` ready and held by `where`. Data must be written first.
  // With `infos` (one per row) their update_info() change comes first, in the same
  // call: a producer's result (a rollout row's length and version with its response)
  // is one controller round trip, and no consumer sees the columns before the infos.
  // Overriders repeat the default.
  virtual void publish(const std::vector<RowId>& rows, const std::vector<std::string>& columns,
                       WarehouseId where, const std::vector<RowInfo>& infos = {}) = 0;
  virtual Claim claim(const std::string& consumer, const ClaimOptions& options) = 0;
  virtual AckResult ack(int64_t lease) = 0;
  // Gives the rows of a lease back to the pool now (a consumer that cannot use them).
  virtual bool release(int64_t lease) = 0;
  // Moves the lease's deadline to now + lease_s; false when it is unknown or expired.
  virtual bool renew(int64_t lease, double lease_s) = 0;
  // Replaces the tokens and version of live rows (a producer that learned them after
  // allocating, e.g. a rollout row's length and policy version); group fields must
  // stay as allocated (aspen::Error otherwise, naming the row), and so does the
  // target: infos[i].target is ignored (only retarget and lease returns move it).
  virtual void update_info(const std::vector<RowId>& rows, const std::vector<RowInfo>& infos) = 0;
  // Retires live rows now, consumed or not (a group that will never be trained:
  // aborted, or dropped by dynamic sampling); their leases lose them. Returns them so
  // the caller frees their data; unknown ids are ignored. unleased_only: only rows no
  // consumer holds a lease on (over-sampling's stragglers: a producer working on a row
  // keeps it, and the caller asks again later). Overriders repeat the default.
  virtual std::vector<RetiredRow> discard(const std::vector<RowId>& rows,
                                          bool unleased_only = false) = 0;
  // A warehouse died with its process (a killed producer): retires every live row
  // with a column held there or owned by it, as discard() does, and returns them
  // (RetiredRow::warehouses still names the dead one: the caller must skip it). The
  // rows are lost; the id stays dead (see DockController).
  virtual std::vector<RetiredRow> retire_warehouse(WarehouseId warehouse) = 0;
  // Re-dispatches every live row targeted to `from` and not leased by anyone to `to`
  // (-1: any target); returns how many rows moved. Rows returned by an expired or
  // released lease lose their target on their own (see DockController).
  virtual int64_t retarget(int32_t from, int32_t to) = 0;
  virtual ConsumerBacklog backlog(const std::string& consumer) = 0;
  // A small status board (instances' queue states, the policy version, run state):
  // post replaces the value under `key`; statuses returns every key with prefix.
  virtual void post_status(const std::string& key, const std::string& value) = 0;
  virtual std::map<std::string, StatusEntry> statuses(const std::string& prefix) = 0;
  virtual nlohmann::json metrics() = 0;
};

class WarehouseApi {
 public:
  virtual ~WarehouseApi() = default;
  // Stores columns of rows; columns[c].values[i] belongs to rows[i].
  virtual void put(const std::vector<RowId>& rows, const std::vector<ColumnData>& columns) = 0;
  // Returns the named columns of rows, values parallel to rows. Throws aspen::Error
  // when a row or column is not held here.
  virtual std::vector<ColumnData> get(const std::vector<RowId>& rows,
                                      const std::vector<std::string>& columns) = 0;
  // Frees retired rows; unknown ids are ignored (erase is idempotent).
  virtual void erase(const std::vector<RowId>& rows) = 0;
  // Versioned weights published by the process that owns this warehouse (a trainer),
  // for rollout instances anywhere to fetch: publish_weights replaces the set;
  // latest_weights returns it when its version is > newer_than, else null (also
  // before the first publish). In-process the set itself is returned (zero copy).
  virtual void publish_weights(std::shared_ptr<const WeightSet> weights) = 0;
  virtual std::shared_ptr<const WeightSet> latest_weights(int64_t newer_than) = 0;
  // pipeline.weight_sync: delta (dock/weight_board.h): publish_weight_delta publishes
  // `weights` with the delta to them from the set published last (both immutable);
  // weight_update(held) is what a holder of version `held` (-1: none) fetches to reach
  // the newest: the deltas after `held` or the full set (WeightBoard::update).
  virtual void publish_weight_delta(std::shared_ptr<const WeightSet> weights,
                                    std::shared_ptr<const WeightDelta> delta) = 0;
  virtual WeightUpdate weight_update(int64_t held) = 0;
  virtual nlohmann::json metrics() = 0;
};

class DockTransport {
 public:
  virtual ~DockTransport() = default;
  virtual ControllerApi& controller() = 0;
  virtual WarehouseId local_warehouse_id() const = 0;
  // The warehouse this process writes to (always in-process, so writes are zero copy).
  virtual WarehouseApi& local_warehouse() = 0;
  // Any warehouse by id; the local one is returned directly.
  virtual WarehouseApi& warehouse(WarehouseId id) = 0;
};

}  // namespace aspen::dock
