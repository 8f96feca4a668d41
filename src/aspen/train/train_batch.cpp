#include "aspen/train/train_batch.h"

#include <cmath>

#include "aspen/train/imports.h"
#include "aspen/util/error.h"

namespace aspen::train {

std::vector<int64_t> TrainBatch::response_offsets() const {
  std::vector<int64_t> offsets(responses.size() + 1, 0);
  for (size_t b = 0; b < responses.size(); ++b) {
    offsets[b + 1] = offsets[b] + static_cast<int64_t>(responses[b].size());
  }
  return offsets;
}

int64_t TrainBatch::num_response_tokens() const {
  return response_offsets().back();
}

int64_t TrainBatch::num_loss_tokens() const {
  const auto mask = token_columns.find(columns::kLossMask);
  if (mask == token_columns.end()) return num_response_tokens();
  return std::llround(mask->second.detach().to(torch::kCPU, torch::kDouble).sum().item<double>());
}

void TrainBatch::validate() const {
  check_input(prompts.size() == responses.size(),
              std::to_string(prompts.size()) + " prompts but " +
                  std::to_string(responses.size()) + " responses",
              "train batch");
  for (size_t b = 0; b < prompts.size(); ++b) {
    check_input(!prompts[b].empty(), "row " + std::to_string(b) + " has an empty prompt",
                "train batch", "every row needs at least one prompt token (e.g. BOS)");
  }
  const int64_t tokens = num_response_tokens();
  for (const auto& [name, column] : token_columns) {
    check_input(column.defined() && column.dim() >= 1 && column.size(0) == tokens,
                "token column must have one entry per response token (" +
                    std::to_string(tokens) + ")",
                "train batch column " + name);
  }
  const auto mask = token_columns.find(columns::kLossMask);
  if (mask != token_columns.end()) {
    const torch::Tensor values = mask->second.detach().to(torch::kCPU, torch::kDouble);
    check_input(values.dim() == 1 && ((values == 0) | (values == 1)).all().item<bool>(),
                "must be [R] with every entry 0 (environment token) or 1 (model token)",
                std::string("train batch column ") + columns::kLossMask);
  }
  for (const auto& [name, column] : row_columns) {
    check_input(column.defined() && column.dim() >= 1 && column.size(0) == num_rows(),
                "row column must have one entry per row (" + std::to_string(num_rows()) + ")",
                "train batch column " + name);
  }
}

const torch::Tensor& TrainBatch::token_column(const std::string& name,
                                              const std::string& who) const {
  auto it = token_columns.find(name);
  if (it == token_columns.end()) {
    throw Error("missing token column '" + name + "'", who,
                "fill it before training (e.g. compute_logprobs for old/ref log-probs)");
  }
  return it->second;
}

}  // namespace aspen::train
