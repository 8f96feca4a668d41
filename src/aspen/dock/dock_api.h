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
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/dock/schema.h"

namespace aspen {

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
  double lease_s = 60.0;  // rows not acked by then go back to the pool
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
  bool empty() const { return rows.empty(); }
};

// A row every consumer has consumed: its data may be freed where it lives.
struct RetiredRow {
  RowId id = 0;
  std::vector<WarehouseId> warehouses;  // distinct warehouses holding its columns
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
  virtual std::vector<RowId> allocate(const std::vector<RowInfo>& rows, double timeout_s) = 0;
  // Marks `columns` of `rows` ready and held by `where`. Data must be written first.
  virtual void publish(const std::vector<RowId>& rows, const std::vector<std::string>& columns,
                       WarehouseId where) = 0;
  virtual Claim claim(const std::string& consumer, const ClaimOptions& options) = 0;
  virtual AckResult ack(int64_t lease) = 0;
  // Gives the rows of a lease back to the pool now (a consumer that cannot use them).
  virtual bool release(int64_t lease) = 0;
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

}  // namespace aspen
