#include "bench/dock_soak_ledger.h"

#include <algorithm>

#include "bench/imports.h"

namespace aspen::bench {

SoakLedger::SoakLedger(std::vector<std::string> consumer_names)
    : consumer_names_(std::move(consumer_names)), journaled_(consumer_names_.size()) {}

DockLedgerHooks SoakLedger::hooks() {
  DockLedgerHooks hooks;
  hooks.allocated = [this](const std::vector<RowId>& rows, const std::vector<RowInfo>& infos,
                           WarehouseId owner) { on_allocated(rows, infos, owner); };
  hooks.acked = [this](int consumer, const std::vector<RowId>& rows) { on_acked(consumer, rows); };
  return hooks;
}

void SoakLedger::on_allocated(const std::vector<RowId>& rows, const std::vector<RowInfo>& infos,
                              WarehouseId owner) {
  MutexLock lock(mutex_);
  for (size_t i = 0; i < rows.size(); ++i) {
    RowRecord& record = rows_[rows[i]];
    record.owner = owner;
    record.bytes = infos[i].tokens;  // the soak's rows carry their size as tokens
    record.acks.assign(consumer_names_.size(), 0);
  }
}

void SoakLedger::on_acked(int consumer, const std::vector<RowId>& rows) {
  MutexLock lock(mutex_);
  for (RowId id : rows) {
    auto it = rows_.find(id);
    if (it == rows_.end()) {
      acks_of_unknown_rows_ += 1;
      continue;
    }
    it->second.acks[consumer] += 1;
  }
}

void SoakLedger::journal_ok(int consumer, const std::vector<RowId>& rows) {
  MutexLock lock(mutex_);
  journaled_[consumer].insert(rows.begin(), rows.end());
}

void SoakLedger::journal_bad(int consumer, RowId row, const std::string& what) {
  MutexLock lock(mutex_);
  journaled_[consumer].insert(row);
  integrity_failures_ += 1;
  if (failure_examples_.size() < 10) {
    failure_examples_.push_back(consumer_names_[consumer] + ": row " + std::to_string(row) + ": " +
                                what);
  }
}

void SoakLedger::record_lost(WarehouseId warehouse, const std::vector<RetiredRow>& rows) {
  MutexLock lock(mutex_);
  for (const RetiredRow& row : rows) {
    auto it = rows_.find(row.id);
    if (it == rows_.end()) {
      lost_unknown_rows_ += 1;
      continue;
    }
    RowRecord& record = it->second;
    record.lost = true;
    record.lost_unpublished = row.warehouses.empty();
    const bool held = std::find(row.warehouses.begin(), row.warehouses.end(), warehouse) !=
                      row.warehouses.end();
    record.lost_outside_owner = record.owner != warehouse && !held;
  }
}

std::vector<RowId> SoakLedger::rows_owned_by(WarehouseId warehouse) {
  MutexLock lock(mutex_);
  std::vector<RowId> ids;
  for (const auto& [id, record] : rows_) {
    if (record.owner == warehouse) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

nlohmann::json SoakLedger::verdict(std::vector<std::string>& violations) {
  MutexLock lock(mutex_);
  const size_t names = consumer_names_.size();
  std::vector<int64_t> consumed(names, 0);
  int64_t published = 0, lost = 0, lost_unpublished = 0, lost_unconsumed = 0, lost_partly = 0;
  int64_t lost_outside = 0, duplicates = 0, unconsumed = 0, unverified = 0;
  int64_t bytes_published = 0, bytes_moved = 0;
  std::vector<std::string> examples = failure_examples_;
  auto example = [&](const std::string& text) {
    if (examples.size() < 20) examples.push_back(text);
  };
  for (const auto& [id, record] : rows_) {
    if (!record.lost_unpublished) {
      published += 1;
      bytes_published += record.bytes;
    }
    int acked_by = 0;
    for (size_t c = 0; c < names; ++c) {
      const int32_t acks = record.acks[c];
      if (acks > 1) {
        duplicates += acks - 1;
        example("row " + std::to_string(id) + " acked " + std::to_string(acks) + " times by " +
                consumer_names_[c]);
      }
      if (acks >= 1) {
        acked_by += 1;
        consumed[c] += 1;
        bytes_moved += record.bytes;
        if (journaled_[c].count(id) == 0) {
          unverified += 1;
          example("row " + std::to_string(id) + " acked by " + consumer_names_[c] +
                  " without a journal entry");
        }
      } else if (!record.lost) {
        unconsumed += 1;
        example("row " + std::to_string(id) + " never consumed by " + consumer_names_[c]);
      }
    }
    if (!record.lost) continue;
    lost += 1;
    if (record.lost_unpublished) {
      lost_unpublished += 1;
    } else if (acked_by == 0) {
      lost_unconsumed += 1;
    } else {
      lost_partly += 1;
    }
    if (record.lost_outside_owner) {
      lost_outside += 1;
      example("row " + std::to_string(id) + " lost with a warehouse that neither owned nor held it");
    }
  }
  nlohmann::json consumed_json = nlohmann::json::object();
  for (size_t c = 0; c < names; ++c) consumed_json[consumer_names_[c]] = consumed[c];
  auto require_zero = [&](const char* name, int64_t value) {
    if (value != 0) violations.push_back(std::string(name) + " = " + std::to_string(value));
  };
  require_zero("duplicates", duplicates);
  require_zero("integrity_failures", integrity_failures_);
  require_zero("unverified_acks", unverified);
  require_zero("unconsumed (row, consumer) pairs of rows not lost", unconsumed);
  require_zero("rows lost with a warehouse that neither owned nor held them", lost_outside);
  require_zero("acks of rows never allocated", acks_of_unknown_rows_);
  require_zero("lost rows never allocated", lost_unknown_rows_);
  return {{"rows_produced", static_cast<int64_t>(rows_.size())},
          {"rows_published", published},
          {"rows_consumed", consumed_json},
          {"rows_lost", lost},
          {"lost",
           {{"published_unconsumed", lost_unconsumed},
            {"published_partly_consumed", lost_partly},
            {"unpublished", lost_unpublished},
            {"why", "retired with the warehouse of a producer killed by SIGKILL: its rows' "
                    "data lived only there, and rows it had allocated but not yet published "
                    "died with it"}}},
          {"bytes_published", bytes_published},
          {"bytes_moved", bytes_moved},
          {"duplicates", duplicates},
          {"integrity_failures", integrity_failures_},
          {"unverified_acks", unverified},
          {"unconsumed", unconsumed},
          {"examples", examples}};
}

}  // namespace aspen::bench
