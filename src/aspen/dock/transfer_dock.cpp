#include "aspen/dock/transfer_dock.h"

#include <map>

#include "aspen/dock/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"

namespace aspen::dock {
namespace {

int64_t bytes_of(const std::vector<ColumnData>& columns) {
  int64_t total = 0;
  for (const ColumnData& column : columns) {
    for (const torch::Tensor& t : column.values) {
      total += static_cast<int64_t>(t.numel() * t.element_size());
    }
  }
  return total;
}

std::vector<std::string> names_of(const std::vector<ColumnData>& columns) {
  std::vector<std::string> names;
  for (const ColumnData& column : columns) names.push_back(column.name);
  return names;
}

}  // namespace

TransferDock::TransferDock(std::shared_ptr<DockTransport> transport)
    : transport_(std::move(transport)) {}

void TransferDock::check_columns(const std::vector<ColumnData>& columns, size_t rows,
                                 const std::vector<RowInfo>* infos) const {
  check_input(!columns.empty(), "put without columns", "dock put");
  for (const ColumnData& column : columns) {
    const ColumnSpec& spec = schema().columns()[schema().column_index(column.name)];
    check_input(column.values.size() == rows,
                "column '" + column.name + "' has " + std::to_string(column.values.size()) +
                    " values for " + std::to_string(rows) + " rows",
                "dock put");
    for (size_t i = 0; i < rows; ++i) {
      const torch::Tensor& t = column.values[i];
      check_input(t.defined(), "undefined tensor for row " + std::to_string(i),
                  "dock put: column '" + column.name + "'");
      check_input(t.scalar_type() == spec.dtype,
                  std::string("dtype ") + c10::toString(t.scalar_type()) + ", schema says " +
                      c10::toString(spec.dtype),
                  "dock put: column '" + column.name + "'");
      if (spec.kind == ColumnKind::kPerToken && infos != nullptr) {
        check_input(t.dim() >= 1 && t.size(0) == (*infos)[i].tokens,
                    "per-token value with " + std::to_string(t.dim() >= 1 ? t.size(0) : 0) +
                        " entries for a row of " + std::to_string((*infos)[i].tokens) + " tokens",
                    "dock put: column '" + column.name + "'");
      }
    }
  }
}

std::vector<RowId> TransferDock::put(const std::vector<RowInfo>& rows,
                                     const std::vector<ColumnData>& columns, double timeout_s) {
  check_columns(columns, rows.size(), &rows);
  // Owned by this process's warehouse: rows it allocated die with it, published or not.
  std::vector<RowId> ids =
      transport_->controller().allocate(rows, timeout_s, transport_->local_warehouse_id());
  if (ids.size() != rows.size()) {
    throw Error("dock stayed full for " + std::to_string(timeout_s) + " s", "dock put",
                "consumers are not keeping up; raise capacity or the timeout");
  }
  transport_->local_warehouse().put(ids, columns);
  transport_->controller().publish(ids, names_of(columns), transport_->local_warehouse_id());
  bytes_put_ += bytes_of(columns);
  row_calls_ += static_cast<int64_t>(ids.size());
  return ids;
}

void TransferDock::put_columns(const std::vector<RowId>& rows,
                               const std::vector<ColumnData>& columns,
                               const std::vector<RowInfo>& infos) {
  check_input(infos.empty() || infos.size() == rows.size(),
              std::to_string(infos.size()) + " infos for " + std::to_string(rows.size()) + " rows",
              "dock put_columns");
  check_columns(columns, rows.size(), infos.empty() ? nullptr : &infos);
  transport_->local_warehouse().put(rows, columns);
  transport_->controller().publish(rows, names_of(columns), transport_->local_warehouse_id(),
                                   infos);
  bytes_put_ += bytes_of(columns);
  row_calls_ += static_cast<int64_t>(rows.size());
}

Claim TransferDock::claim(const std::string& consumer, const ClaimOptions& options) {
  Claim claim = transport_->controller().claim(consumer, options);
  row_calls_ += static_cast<int64_t>(claim.rows.size());
  return claim;
}

std::vector<ColumnData> TransferDock::get(const Claim& claim) {
  row_calls_ += static_cast<int64_t>(claim.rows.size());
  std::vector<ColumnData> out;
  for (const std::string& name : claim.columns) {
    out.push_back(ColumnData{name, std::vector<torch::Tensor>(claim.rows.size())});
  }
  // (warehouse, column) -> row positions; one fetch per warehouse and column set.
  std::map<WarehouseId, std::map<size_t, std::vector<size_t>>> plan;
  for (size_t i = 0; i < claim.rows.size(); ++i) {
    for (size_t c = 0; c < claim.columns.size(); ++c) {
      plan[claim.rows[i].locations[c]][c].push_back(i);
    }
  }
  for (const auto& [where, by_column] : plan) {
    // Columns sharing the same row list (the usual case) are fetched in one call.
    std::map<std::vector<size_t>, std::vector<size_t>> by_rows;
    for (const auto& [column, positions] : by_column) by_rows[positions].push_back(column);
    for (const auto& [positions, column_ids] : by_rows) {
      std::vector<RowId> ids;
      for (size_t i : positions) ids.push_back(claim.rows[i].id);
      std::vector<std::string> names;
      for (size_t c : column_ids) names.push_back(claim.columns[c]);
      std::vector<ColumnData> fetched = transport_->warehouse(where).get(ids, names);
      (where == transport_->local_warehouse_id() ? bytes_fetched_local_ : bytes_fetched_remote_) +=
          bytes_of(fetched);
      for (size_t k = 0; k < column_ids.size(); ++k) {
        for (size_t j = 0; j < positions.size(); ++j) {
          out[column_ids[k]].values[positions[j]] = std::move(fetched[k].values[j]);
        }
      }
    }
  }
  return out;
}

bool TransferDock::ack(const Claim& claim) {
  if (claim.lease == 0) return true;  // an empty claim holds nothing
  AckResult result = transport_->controller().ack(claim.lease);
  row_calls_ += static_cast<int64_t>(claim.rows.size());
  erase_retired(result.retired);
  return result.acknowledged;
}

void TransferDock::erase_retired(const std::vector<RetiredRow>& retired) {
  std::map<WarehouseId, std::vector<RowId>> to_erase;
  for (const RetiredRow& row : retired) {
    for (WarehouseId where : row.warehouses) to_erase[where].push_back(row.id);
  }
  for (const auto& [where, ids] : to_erase) {
    try {
      transport_->warehouse(where).erase(ids);
      rows_erased_ += static_cast<int64_t>(ids.size());
    } catch (const Error& error) {
      // The rows are retired either way; a warehouse that is gone has nothing to free.
      log_warn("dock: could not erase ", ids.size(), " retired rows in warehouse ", where, ": ",
               error.what());
    }
  }
}

bool TransferDock::release(const Claim& claim) {
  row_calls_ += static_cast<int64_t>(claim.rows.size());
  return claim.lease != 0 && transport_->controller().release(claim.lease);
}

bool TransferDock::renew(const Claim& claim, double lease_s) {
  row_calls_ += static_cast<int64_t>(claim.rows.size());
  return claim.lease == 0 || transport_->controller().renew(claim.lease, lease_s);
}

void TransferDock::update_info(const std::vector<RowId>& rows, const std::vector<RowInfo>& infos) {
  row_calls_ += static_cast<int64_t>(rows.size());
  transport_->controller().update_info(rows, infos);
}

std::vector<RetiredRow> TransferDock::discard(const std::vector<RowId>& rows, bool unleased_only) {
  row_calls_ += static_cast<int64_t>(rows.size());
  std::vector<RetiredRow> retired = transport_->controller().discard(rows, unleased_only);
  erase_retired(retired);
  return retired;
}

int64_t TransferDock::retarget(int32_t from, int32_t to) {
  return transport_->controller().retarget(from, to);
}

ConsumerBacklog TransferDock::backlog(const std::string& consumer) {
  return transport_->controller().backlog(consumer);
}

void TransferDock::post_status(const std::string& key, const std::string& value) {
  transport_->controller().post_status(key, value);
}

std::map<std::string, StatusEntry> TransferDock::statuses(const std::string& prefix) {
  return transport_->controller().statuses(prefix);
}

void TransferDock::publish_weights(std::shared_ptr<const WeightSet> weights) {
  transport_->local_warehouse().publish_weights(std::move(weights));
}

void TransferDock::publish_weights(std::shared_ptr<const WeightSet> weights,
                                   std::shared_ptr<const WeightDelta> delta) {
  transport_->local_warehouse().publish_weight_delta(std::move(weights), std::move(delta));
}

WeightUpdate TransferDock::weight_update(WarehouseId where, int64_t held) {
  return transport_->warehouse(where).weight_update(held);
}

std::shared_ptr<const WeightSet> TransferDock::latest_weights(WarehouseId where,
                                                              int64_t newer_than) {
  return transport_->warehouse(where).latest_weights(newer_than);
}

nlohmann::json TransferDock::metrics() {
  return {{"controller", transport_->controller().metrics()},
          {"local_warehouse", transport_->local_warehouse().metrics()},
          {"client",
           {{"bytes_put", bytes_put_.load()},
            {"bytes_fetched_local", bytes_fetched_local_.load()},
            {"bytes_fetched_remote", bytes_fetched_remote_.load()},
            {"rows_erased", rows_erased_.load()},
            {"row_calls", row_calls_.load()}}}};
}

}  // namespace aspen::dock
