// DockSchema: what a TransferDock stores and who reads it. Columns are named tensors
// per row (a dtype; per-token columns have one entry per token along dim 0, per-row
// columns any shape). Consumers are named readers (rollout, reward, batch...)
// each needing a subset of columns; a row is ready for a consumer once every needed
// column has been published, and it retires once every consumer has consumed it.
// Also the small value types shared by the controller, warehouses and transports.
// Contract: the schema is immutable after construction; validate() throws aspen::Error
// for empty/duplicate names, unknown needed columns or more than kMaxConsumers.
// Thread safety: immutable, so safe to share.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "aspen/dock/imports.h"

namespace aspen::dock {

using RowId = int64_t;
using WarehouseId = int32_t;
constexpr WarehouseId kNoWarehouse = -1;

enum class ColumnKind { kPerToken, kPerRow };

struct ColumnSpec {
  std::string name;
  torch::Dtype dtype = torch::kFloat32;
  ColumnKind kind = ColumnKind::kPerRow;
};

struct ConsumerSpec {
  std::string name;
  std::vector<std::string> columns;  // the columns this consumer reads
};

// What a producer declares about a row when it allocates it.
struct RowInfo {
  int64_t group_id = 0;    // the prompt the row answers; a group is its n samples
  int32_t group_size = 1;  // n: how many rows the group has in total
  int64_t tokens = 0;      // token length, the unit of balanced claims
  int64_t version = 0;     // policy version that generated the row (before it is
                           // generated: a lower bound, the version at admission)
  int32_t target = -1;     // the rollout instance the row was dispatched to; -1: none
};

// One column's values for a list of rows: values[i] belongs to the i-th row.
struct ColumnData {
  std::string name;
  std::vector<torch::Tensor> values;
};

class DockSchema {
 public:
  // Consumers are bit positions in a per-row mask, hence the limit.
  static constexpr int kMaxConsumers = 64;

  DockSchema() = default;
  DockSchema(std::vector<ColumnSpec> columns, std::vector<ConsumerSpec> consumers);

  const std::vector<ColumnSpec>& columns() const { return columns_; }
  const std::vector<ConsumerSpec>& consumers() const { return consumers_; }
  // Index lookups; throw aspen::Error naming the unknown column/consumer.
  int column_index(const std::string& name) const;
  int consumer_index(const std::string& name) const;
  // Column indices a consumer needs, in the order its spec lists them.
  const std::vector<int>& needed_columns(int consumer) const { return needed_[consumer]; }

 private:
  std::vector<ColumnSpec> columns_;
  std::vector<ConsumerSpec> consumers_;
  std::vector<std::vector<int>> needed_;  // [consumer] -> column indices
};

}  // namespace aspen::dock
