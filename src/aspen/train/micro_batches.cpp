#include "aspen/train/micro_batches.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "aspen/train/imports.h"
#include "aspen/util/error.h"

namespace aspen::train {
namespace {

// Longest-first into the least-loaded of k bins with room; false if a row fits nowhere.
bool place_longest_first(const std::vector<int64_t>& order, const std::vector<int64_t>& lengths,
                         int64_t max_tokens, size_t k, std::vector<std::vector<int64_t>>& bins) {
  bins.assign(k, {});
  std::vector<int64_t> load(k, 0);
  for (int64_t row : order) {
    size_t best = k;
    for (size_t b = 0; b < k; ++b) {
      if (load[b] + lengths[row] > max_tokens) continue;
      if (best == k || load[b] < load[best]) best = b;
    }
    if (best == k) return false;
    bins[best].push_back(row);
    load[best] += lengths[row];
  }
  return true;
}

torch::Tensor long_tensor(const std::vector<int64_t>& values, torch::Device device) {
  return torch::tensor(values, torch::kLong).to(device);
}

}  // namespace

std::vector<std::vector<int64_t>> plan_micro_batches(const std::vector<int64_t>& lengths,
                                                     int64_t max_tokens) {
  check_input(max_tokens >= 1, "token budget must be >= 1, got " + std::to_string(max_tokens),
              "max_tokens_per_micro_batch");
  std::vector<int64_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });

  std::vector<std::vector<int64_t>> plan;
  std::vector<int64_t> fitting;
  int64_t fitting_tokens = 0;
  for (int64_t row : order) {
    if (lengths[row] > max_tokens) {
      plan.push_back({row});
    } else {
      fitting.push_back(row);
      fitting_tokens += lengths[row];
    }
  }
  if (!fitting.empty()) {
    size_t k = static_cast<size_t>(std::max<int64_t>(1, (fitting_tokens + max_tokens - 1) /
                                                            max_tokens));
    std::vector<std::vector<int64_t>> bins;
    // Terminates: with one bin per row every row fits.
    while (!place_longest_first(fitting, lengths, max_tokens, k, bins)) ++k;
    for (auto& bin : bins) {
      if (bin.empty()) continue;
      std::sort(bin.begin(), bin.end());
      plan.push_back(std::move(bin));
    }
  }
  return plan;
}

MicroBatch pack_rows(const TrainBatch& batch, const std::vector<int64_t>& rows,
                     torch::Device device) {
  const std::vector<int64_t> batch_offsets = batch.response_offsets();
  MicroBatch mb;
  mb.rows = rows;
  std::vector<int64_t> ids, cu{0}, logprob_index, hidden_index, targets, resp_cu{0}, batch_index;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t row = rows[i];
    check_input(row >= 0 && row < batch.num_rows(),
                "row index " + std::to_string(row) + " out of range", "micro-batch rows");
    const auto& prompt = batch.prompts[row];
    const auto& response = batch.responses[row];
    const int64_t start = cu.back();
    // token_logprobs() emits n-1 entries per sequence, so sequence i starts at start - i.
    const int64_t logprob_start = start - static_cast<int64_t>(i);
    const int64_t prompt_len = static_cast<int64_t>(prompt.size());
    ids.insert(ids.end(), prompt.begin(), prompt.end());
    ids.insert(ids.end(), response.begin(), response.end());
    for (size_t j = 0; j < response.size(); ++j) {
      const int64_t position = prompt_len + static_cast<int64_t>(j) - 1;
      hidden_index.push_back(start + position);
      logprob_index.push_back(logprob_start + position);
      targets.push_back(response[j]);
      batch_index.push_back(batch_offsets[row] + static_cast<int64_t>(j));
    }
    cu.push_back(static_cast<int64_t>(ids.size()));
    resp_cu.push_back(resp_cu.back() + static_cast<int64_t>(response.size()));
  }
  mb.num_tokens = cu.back();
  mb.num_response_tokens = resp_cu.back();
  mb.input_ids = long_tensor(ids, device);
  mb.cu_seqlens = long_tensor(cu, device);
  mb.logprob_index = long_tensor(logprob_index, device);
  mb.hidden_index = long_tensor(hidden_index, device);
  mb.target_ids = long_tensor(targets, device);
  mb.response_cu_seqlens = long_tensor(resp_cu, device);
  mb.batch_token_index = long_tensor(batch_index, device);
  for (const auto& [name, column] : batch.token_columns) {
    mb.token_columns[name] =
        column.index_select(0, mb.batch_token_index.to(column.device())).to(device);
  }
  const auto mask = mb.token_columns.find(columns::kLossMask);
  mb.num_loss_tokens =
      mask == mb.token_columns.end()
          ? mb.num_response_tokens
          : std::llround(mask->second.to(torch::kCPU, torch::kDouble).sum().item<double>());
  const torch::Tensor row_index = long_tensor(rows, torch::kCPU);
  for (const auto& [name, column] : batch.row_columns) {
    mb.row_columns[name] = column.index_select(0, row_index.to(column.device())).to(device);
  }
  return mb;
}

std::vector<MicroBatch> make_micro_batches(const TrainBatch& batch,
                                           const std::vector<int64_t>& rows, int64_t max_tokens,
                                           torch::Device device) {
  std::vector<int64_t> lengths;
  lengths.reserve(rows.size());
  for (int64_t row : rows) {
    check_input(row >= 0 && row < batch.num_rows(),
                "row index " + std::to_string(row) + " out of range", "micro-batch rows");
    lengths.push_back(static_cast<int64_t>(batch.prompts[row].size() +
                                           batch.responses[row].size()));
  }
  std::vector<MicroBatch> out;
  for (const auto& positions : plan_micro_batches(lengths, max_tokens)) {
    std::vector<int64_t> selected;
    selected.reserve(positions.size());
    for (int64_t p : positions) selected.push_back(rows[p]);
    out.push_back(pack_rows(batch, selected, device));
  }
  return out;
}

std::vector<MicroBatch> make_micro_batches(const TrainBatch& batch, int64_t max_tokens,
                                           torch::Device device) {
  std::vector<int64_t> rows(static_cast<size_t>(batch.num_rows()));
  std::iota(rows.begin(), rows.end(), 0);
  return make_micro_batches(batch, rows, max_tokens, device);
}

PackedSeqs response_packing(const MicroBatch& micro_batch) {
  const PackedSeqs packed = PackedSeqs::from_cu_seqlens(micro_batch.response_cu_seqlens);
  const auto mask = micro_batch.token_columns.find(columns::kLossMask);
  return mask == micro_batch.token_columns.end() ? packed : packed.with_loss_mask(mask->second);
}

PackingStats packing_stats(const std::vector<MicroBatch>& micro_batches) {
  PackingStats stats;
  stats.micro_batches = static_cast<int64_t>(micro_batches.size());
  for (const auto& mb : micro_batches) {
    stats.tokens += mb.num_tokens;
    stats.max_tokens = std::max(stats.max_tokens, mb.num_tokens);
    stats.min_tokens =
        stats.min_tokens == 0 ? mb.num_tokens : std::min(stats.min_tokens, mb.num_tokens);
  }
  return stats;
}

}  // namespace aspen::train
