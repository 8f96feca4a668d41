#include "aspen/pipeline/dp_shares.h"

#include <algorithm>

#include "aspen/dock/token_balance.h"
#include "aspen/pipeline/imports.h"
#include "aspen/train/batch_rows.h"

namespace aspen::pipeline {

std::vector<std::vector<int64_t>> balanced_share_rows(const TrainBatch& batch, int ranks) {
  batch.validate();
  std::vector<int64_t> tokens;
  tokens.reserve(batch.responses.size());
  for (const auto& response : batch.responses) tokens.push_back(static_cast<int64_t>(response.size()));
  const TokenPartition partition = balance_by_tokens(tokens, ranks);
  std::vector<std::vector<int64_t>> shares;
  for (const std::vector<int>& rank : partition.ranks) {
    std::vector<int64_t> rows(rank.begin(), rank.end());
    std::sort(rows.begin(), rows.end());
    shares.push_back(std::move(rows));
  }
  return shares;
}

std::vector<TrainBatch> split_balanced(const TrainBatch& batch, int ranks) {
  std::vector<TrainBatch> out;
  for (const auto& rows : balanced_share_rows(batch, ranks)) out.push_back(select_rows(batch, rows));
  return out;
}

}  // namespace aspen::pipeline
