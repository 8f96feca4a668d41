#include "aspen/model/packing.h"

#include <string>

#include "aspen/model/imports.h"
#include "aspen/util/error.h"

namespace aspen::model {

std::vector<int64_t> check_packed_batch(const torch::Tensor& input_ids,
                                        const torch::Tensor& cu_seqlens, int64_t vocab_size) {
  check_input(input_ids.dim() == 1 && input_ids.scalar_type() == torch::kLong,
              "expected a 1-D int64 tensor of packed token ids", "input_ids");
  check_input(
      cu_seqlens.dim() == 1 && cu_seqlens.size(0) >= 1 && cu_seqlens.scalar_type() == torch::kLong,
      "expected a 1-D int64 tensor of B+1 sequence offsets", "cu_seqlens");
  torch::Tensor host = cu_seqlens.to(torch::kCPU).contiguous();
  std::vector<int64_t> offsets(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
  const int64_t total = input_ids.size(0);
  check_input(offsets.front() == 0, "first offset must be 0", "cu_seqlens");
  check_input(offsets.back() == total,
              "last offset " + std::to_string(offsets.back()) + " must equal the token count " +
                  std::to_string(total),
              "cu_seqlens");
  for (size_t i = 1; i < offsets.size(); ++i) {
    check_input(offsets[i] >= offsets[i - 1], "offsets decrease at index " + std::to_string(i),
                "cu_seqlens");
  }
  if (input_ids.device().is_cpu() && total > 0) {
    const int64_t lo = input_ids.min().item<int64_t>();
    const int64_t hi = input_ids.max().item<int64_t>();
    if (lo < 0 || hi >= vocab_size) {
      throw Error("token id " + std::to_string(lo < 0 ? lo : hi) + " outside the vocabulary [0, " +
                      std::to_string(vocab_size) + ")",
                  "input_ids", "check the tokenizer matches the model");
    }
  }
  return offsets;
}

torch::Tensor packed_positions(const std::vector<int64_t>& offsets, torch::Device device) {
  const int64_t total = offsets.back();
  torch::Tensor positions = torch::empty({total}, torch::kLong);
  int64_t* p = positions.data_ptr<int64_t>();
  for (size_t b = 0; b + 1 < offsets.size(); ++b) {
    for (int64_t t = offsets[b]; t < offsets[b + 1]; ++t) p[t] = t - offsets[b];
  }
  return positions.to(device);
}

torch::Tensor next_token_rows(const std::vector<int64_t>& offsets, torch::Device device) {
  std::vector<int64_t> rows;
  rows.reserve(offsets.back());
  for (size_t b = 0; b + 1 < offsets.size(); ++b) {
    for (int64_t t = offsets[b]; t + 1 < offsets[b + 1]; ++t) rows.push_back(t);
  }
  return torch::tensor(rows, torch::kLong).to(device);
}

}  // namespace aspen::model
