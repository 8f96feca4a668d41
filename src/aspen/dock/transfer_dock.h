// TransferDock: the facade the RL loop uses. A producer put()s rows with columns:
// the rows are allocated at the controller (blocking at capacity; owned by the local
// warehouse, so they die with it: ControllerApi::retire_warehouse), the tensors go
// into this process's local warehouse, and the controller receives metadata only.
// A consumer claim()s rows, get()s their columns straight from the warehouses the
// claim names (grouped so there is one fetch per warehouse), and ack()s; acked rows
// that every consumer has consumed are erased from their warehouses here, as are
// discarded rows. The controller's upkeep calls (renew, update_info, retarget,
// backlog, the status board) pass straight through; weights are published to this
// process's local warehouse and fetched from any warehouse (WarehouseApi).
// Validation: column names, dtypes and, for per-token columns, dim 0 == row tokens
// are checked on put (aspen::Error); other failures come from the transport.
// Thread safety: thread-safe if the transport is (both provided ones are); byte
// counters are atomics.
#pragma once

#include <atomic>
#include <memory>

#include "aspen/dock/dock_api.h"
#include "aspen/dock/imports.h"

namespace aspen::dock {

class TransferDock {
 public:
  explicit TransferDock(std::shared_ptr<DockTransport> transport);

  const DockSchema& schema() const { return transport_->controller().schema(); }
  DockTransport& transport() { return *transport_; }

  // New rows: columns[c].values[i] belongs to rows[i]. Blocks while the dock is full;
  // throws aspen::Error after timeout_s. Returns the row ids.
  std::vector<RowId> put(const std::vector<RowInfo>& rows, const std::vector<ColumnData>& columns,
                         double timeout_s = 3600.0);
  // More columns for live rows (e.g. a rollout's response); with `infos` (one per row)
  // their tokens and version change in the same controller call (ControllerApi::publish).
  void put_columns(const std::vector<RowId>& rows, const std::vector<ColumnData>& columns,
                   const std::vector<RowInfo>& infos = {});

  Claim claim(const std::string& consumer, const ClaimOptions& options);
  // The claim's columns, values parallel to claim.rows.
  std::vector<ColumnData> get(const Claim& claim);
  // Acknowledges the lease; false when it had expired (the rows went back to the pool).
  bool ack(const Claim& claim);
  bool release(const Claim& claim);
  // Extends the claim's lease to now + lease_s; false when it had expired. An empty
  // claim holds nothing and is never lost (true), as in ack().
  bool renew(const Claim& claim, double lease_s);
  void update_info(const std::vector<RowId>& rows, const std::vector<RowInfo>& infos);
  // Retires the rows at once (ControllerApi::discard) and erases their data from the
  // warehouses holding it; returns the rows that were live.
  std::vector<RetiredRow> discard(const std::vector<RowId>& rows, bool unleased_only = false);
  int64_t retarget(int32_t from, int32_t to);
  ConsumerBacklog backlog(const std::string& consumer);
  void post_status(const std::string& key, const std::string& value);
  std::map<std::string, StatusEntry> statuses(const std::string& prefix = "");

  // Replaces the weights this process serves (to the LOCAL warehouse; aspen::Error
  // where that warehouse is remote: central mode).
  void publish_weights(std::shared_ptr<const WeightSet> weights);
  // The same with the delta to `weights` from the set published last
  // (WarehouseApi::publish_weight_delta).
  void publish_weights(std::shared_ptr<const WeightSet> weights,
                       std::shared_ptr<const WeightDelta> delta);
  // The weights published at warehouse `where` if newer than newer_than, else null.
  std::shared_ptr<const WeightSet> latest_weights(WarehouseId where, int64_t newer_than);
  // What a holder of version `held` fetches from warehouse `where` to reach its newest
  // weights: the deltas after `held`, or the full set (WarehouseApi::weight_update).
  WeightUpdate weight_update(WarehouseId where, int64_t held);

  // {"controller": ..., "local_warehouse": ..., "client": {bytes_put, bytes_fetched_local,
  //  bytes_fetched_remote, rows_erased, row_calls}}.
  nlohmann::json metrics();
  // Calls of this facade so far (put, put_columns, claim, get, ack, release, renew,
  // update_info, discard), each counted once per row it names (`row_calls` of
  // metrics()): the dock traffic of one sample's trip (docs/design.md) is the growth
  // per row.
  int64_t row_calls() const { return row_calls_.load(); }

 private:
  void check_columns(const std::vector<ColumnData>& columns, size_t rows,
                     const std::vector<RowInfo>* infos) const;
  void erase_retired(const std::vector<RetiredRow>& retired);

  std::shared_ptr<DockTransport> transport_;
  std::atomic<int64_t> bytes_put_{0};
  std::atomic<int64_t> bytes_fetched_local_{0};
  std::atomic<int64_t> bytes_fetched_remote_{0};
  std::atomic<int64_t> rows_erased_{0};
  std::atomic<int64_t> row_calls_{0};  // see row_calls()
};

}  // namespace aspen::dock
