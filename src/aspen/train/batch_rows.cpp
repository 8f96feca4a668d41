#include "aspen/train/batch_rows.h"

#include <string>

#include "aspen/train/imports.h"
#include "aspen/util/error.h"

namespace aspen::train {

TrainBatch select_rows(const TrainBatch& batch, const std::vector<int64_t>& rows) {
  batch.validate();
  const std::vector<int64_t> offsets = batch.response_offsets();
  TrainBatch out;
  std::vector<int64_t> token_index;
  for (int64_t row : rows) {
    check_input(row >= 0 && row < batch.num_rows(),
                "row index " + std::to_string(row) + " out of range [0, " +
                    std::to_string(batch.num_rows()) + ")",
                "select_rows");
    out.prompts.push_back(batch.prompts[row]);
    out.responses.push_back(batch.responses[row]);
    for (int64_t t = offsets[row]; t < offsets[row + 1]; ++t) token_index.push_back(t);
  }
  auto index_on = [](const std::vector<int64_t>& index, const torch::Tensor& like) {
    return torch::tensor(index, torch::kInt64).to(like.device());
  };
  for (const auto& [name, column] : batch.token_columns) {
    out.token_columns[name] = column.index_select(0, index_on(token_index, column));
  }
  for (const auto& [name, column] : batch.row_columns) {
    out.row_columns[name] = column.index_select(0, index_on(rows, column));
  }
  return out;
}

}  // namespace aspen::train
