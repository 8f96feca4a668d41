// TransferDock: the facade the RL loop uses. A producer put()s rows with columns:
// the rows are allocated at the controller (blocking at capacity), the tensors go
// into this process's local warehouse, and the controller receives metadata only.
// A consumer claim()s rows, get()s their columns straight from the warehouses the
// claim names (grouped so there is one fetch per warehouse), and ack()s; acked rows
// that every consumer has consumed are erased from their warehouses here.
// Validation: column names, dtypes and, for per-token columns, dim 0 == row tokens
// are checked on put (aspen::Error); other failures come from the transport.
// Thread safety: thread-safe if the transport is (both provided ones are); byte
// counters are atomics.
#pragma once

#include <atomic>
#include <memory>

#include "aspen/dock/dock_api.h"

namespace aspen {

class TransferDock {
 public:
  explicit TransferDock(std::shared_ptr<DockTransport> transport);

  const DockSchema& schema() const { return transport_->controller().schema(); }
  DockTransport& transport() { return *transport_; }

  // New rows: columns[c].values[i] belongs to rows[i]. Blocks while the dock is full;
  // throws aspen::Error after timeout_s. Returns the row ids.
  std::vector<RowId> put(const std::vector<RowInfo>& rows, const std::vector<ColumnData>& columns,
                         double timeout_s = 3600.0);
  // More columns for live rows (e.g. reference log-probs computed later).
  void put_columns(const std::vector<RowId>& rows, const std::vector<ColumnData>& columns);

  Claim claim(const std::string& consumer, const ClaimOptions& options);
  // The claim's columns, values parallel to claim.rows.
  std::vector<ColumnData> get(const Claim& claim);
  // Acknowledges the lease; false when it had expired (the rows went back to the pool).
  bool ack(const Claim& claim);
  bool release(const Claim& claim);

  // {"controller": ..., "local_warehouse": ..., "client": {bytes_put, bytes_fetched_local,
  //  bytes_fetched_remote, ...}}.
  nlohmann::json metrics();

 private:
  void check_columns(const std::vector<ColumnData>& columns, size_t rows,
                     const std::vector<RowInfo>* infos) const;

  std::shared_ptr<DockTransport> transport_;
  std::atomic<int64_t> bytes_put_{0};
  std::atomic<int64_t> bytes_fetched_local_{0};
  std::atomic<int64_t> bytes_fetched_remote_{0};
  std::atomic<int64_t> rows_erased_{0};
};

}  // namespace aspen
