// Shared fixtures for the dock tests: a two-column schema with two consumers
// (actor needs tokens+reward, reference needs tokens) and row helpers.
#pragma once

#include <torch/torch.h>

#include "aspen/dock/schema.h"

namespace aspen::testing {

using namespace aspen::dock;

inline DockSchema two_consumer_schema() {
  return DockSchema({{"tokens", torch::kInt64, ColumnKind::kPerToken},
                     {"reward", torch::kFloat32, ColumnKind::kPerRow}},
                    {{"actor", {"tokens", "reward"}}, {"reference", {"tokens"}}});
}

inline RowInfo row_info(int64_t group, int32_t group_size, int64_t tokens, int64_t version = 0,
                        int32_t target = -1) {
  return RowInfo{group, group_size, tokens, version, target};
}

// Columns for rows whose token column holds `marker` everywhere (lets readers check
// that the data they got belongs to the row they claimed).
inline std::vector<ColumnData> columns_for(const std::vector<RowInfo>& rows,
                                           const std::vector<int64_t>& markers) {
  ColumnData tokens{"tokens", {}};
  ColumnData reward{"reward", {}};
  for (size_t i = 0; i < rows.size(); ++i) {
    tokens.values.push_back(torch::full({rows[i].tokens}, markers[i], torch::kInt64));
    reward.values.push_back(torch::full({1}, static_cast<float>(markers[i]), torch::kFloat32));
  }
  return {tokens, reward};
}

}  // namespace aspen::testing
