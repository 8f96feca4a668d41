// SoakLedger: the dock soak's accounting (bench/dock_soak.h states the rule). It
// takes consumption from the controller's audit hooks (every allocation with its
// owner, every ack with the rows it consumed), verification from the consumers'
// journals, and losses from the driver's retire_warehouse calls, and at the end
// judges every row: acked exactly once by every consumer, or lost with a killed
// producer that owned or held it.
// Thread safety: all methods are thread-safe (the hooks run on the controller's
// service threads, the rest on the driver's). Locking: mutex_ guards every member.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aspen/dock/controller.h"
#include "aspen/util/mutex.h"
#include "bench/imports.h"

namespace aspen::bench {

class SoakLedger {
 public:
  explicit SoakLedger(std::vector<std::string> consumer_names);

  // Feeds the ledger from a DockController (DockControllerOptions::hooks). The
  // ledger must outlive the controller's last call.
  DockLedgerHooks hooks();
  // A consumer's journal: rows it verified, or one it found corrupt, before acking.
  void journal_ok(int consumer, const std::vector<RowId>& rows);
  void journal_bad(int consumer, RowId row, const std::string& what);
  // The rows the controller lost with `warehouse`, the warehouse of a producer the
  // driver killed (retire_warehouse's answer).
  void record_lost(WarehouseId warehouse, const std::vector<RetiredRow>& rows);
  // Every row ever allocated owned by `warehouse` (the end-of-run sweep erases them).
  std::vector<RowId> rows_owned_by(WarehouseId warehouse);

  // The verdict: {"rows_produced", "rows_published", "rows_consumed": {name: n},
  // "rows_lost", "lost": {...}, "bytes_published", "bytes_moved", "duplicates",
  // "integrity_failures", "unverified_acks", "unconsumed", "examples"} plus the
  // failed invariants appended to `violations`.
  nlohmann::json verdict(std::vector<std::string>& violations);

 private:
  struct RowRecord {
    WarehouseId owner = kNoWarehouse;
    int64_t bytes = 0;
    std::vector<int32_t> acks;  // [consumer]
    bool lost = false;
    bool lost_unpublished = false;       // retired before any column was published
    bool lost_outside_owner = false;     // neither owned by nor held in the dead warehouse
  };

  void on_allocated(const std::vector<RowId>& rows, const std::vector<RowInfo>& infos,
                    WarehouseId owner) EXCLUDES(mutex_);
  void on_acked(int consumer, const std::vector<RowId>& rows) EXCLUDES(mutex_);

  const std::vector<std::string> consumer_names_;
  Mutex mutex_;
  std::unordered_map<RowId, RowRecord> rows_ GUARDED_BY(mutex_);
  std::vector<std::unordered_set<RowId>> journaled_ GUARDED_BY(mutex_);  // [consumer] ok or bad
  int64_t integrity_failures_ GUARDED_BY(mutex_) = 0;
  std::vector<std::string> failure_examples_ GUARDED_BY(mutex_);
  int64_t acks_of_unknown_rows_ GUARDED_BY(mutex_) = 0;
  int64_t lost_unknown_rows_ GUARDED_BY(mutex_) = 0;
};

}  // namespace aspen::bench
