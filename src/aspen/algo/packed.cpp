#include "aspen/algo/packed.h"

#include <torch/torch.h>

#include "aspen/algo/imports.h"
#include "aspen/util/error.h"

namespace aspen::algo {

PackedSeqs PackedSeqs::from_cu_seqlens(const torch::Tensor& cu_seqlens) {
  check_input(cu_seqlens.defined() && cu_seqlens.dim() == 1 && cu_seqlens.numel() >= 1,
              "cu_seqlens must be a 1-D tensor with B+1 >= 1 entries", "cu_seqlens");
  check_input(cu_seqlens.scalar_type() == torch::kInt64, "cu_seqlens must be int64", "cu_seqlens",
              "pass offsets as torch::kLong");
  torch::Tensor host = cu_seqlens.to(torch::kCPU).contiguous();
  const int64_t* p = host.data_ptr<int64_t>();
  PackedSeqs out;
  out.host_offsets_.assign(p, p + host.numel());
  check_input(out.host_offsets_[0] == 0, "cu_seqlens[0] must be 0", "cu_seqlens");
  for (size_t i = 1; i < out.host_offsets_.size(); ++i) {
    check_input(out.host_offsets_[i] >= out.host_offsets_[i - 1],
                "cu_seqlens must be non-decreasing (entry " + std::to_string(i) + ")",
                "cu_seqlens");
  }
  out.cu_seqlens_ = cu_seqlens;
  out.lengths_ = cu_seqlens.slice(0, 1) - cu_seqlens.slice(0, 0, -1);
  // repeat_interleave(repeats) = [0]*L_0 ++ [1]*L_1 ++ ...: the row id of every token.
  out.row_ids_ = torch::repeat_interleave(out.lengths_);
  return out;
}

PackedSeqs PackedSeqs::from_lengths(const std::vector<int64_t>& lengths, torch::Device device) {
  std::vector<int64_t> offsets(lengths.size() + 1, 0);
  for (size_t i = 0; i < lengths.size(); ++i) {
    check_input(lengths[i] >= 0, "sequence length must be >= 0", "lengths");
    offsets[i + 1] = offsets[i] + lengths[i];
  }
  return from_cu_seqlens(torch::tensor(offsets, torch::kLong).to(device));
}

void PackedSeqs::check_tokens(const torch::Tensor& x, const std::string& what) const {
  check_input(x.defined() && x.dim() == 1 && x.size(0) == num_tokens(),
              "expected a per-token [T] tensor with T = " + std::to_string(num_tokens()) +
                  (x.defined() ? ", got shape " + c10::str(x.sizes()) : ", got undefined"),
              what);
}

void PackedSeqs::check_rows(const torch::Tensor& x, const std::string& what) const {
  check_input(x.defined() && x.dim() == 1 && x.size(0) == num_seqs(),
              "expected a per-row [B] tensor with B = " + std::to_string(num_seqs()) +
                  (x.defined() ? ", got shape " + c10::str(x.sizes()) : ", got undefined"),
              what);
}

torch::Tensor broadcast_rows(const torch::Tensor& per_row, const PackedSeqs& packed) {
  packed.check_rows(per_row, "broadcast_rows: per_row");
  return per_row.index_select(0, packed.row_ids());
}

torch::Tensor segment_sum(const torch::Tensor& per_token, const PackedSeqs& packed) {
  packed.check_tokens(per_token, "segment_sum: per_token");
  return torch::zeros({packed.num_seqs()}, per_token.options())
      .index_add(0, packed.row_ids(), per_token);
}

torch::Tensor place_at_last_token(const torch::Tensor& per_row, const PackedSeqs& packed) {
  packed.check_rows(per_row, "place_at_last_token: per_row");
  const auto& off = packed.host_offsets();
  for (int64_t b = 0; b < packed.num_seqs(); ++b) {
    check_input(off[b + 1] > off[b], "sequence " + std::to_string(b) + " is empty",
                "place_at_last_token", "an outcome reward needs at least one response token");
  }
  torch::Tensor last = packed.cu_seqlens().slice(0, 1) - 1;  // [B], distinct: no empty rows
  return torch::zeros({packed.num_tokens()}, per_row.options()).index_copy(0, last, per_row);
}

torch::Tensor discounted_reverse_cumsum(const torch::Tensor& x, const PackedSeqs& packed,
                                        double gamma) {
  packed.check_tokens(x, "discounted_reverse_cumsum: x");
  torch::Tensor in = x.detach().to(torch::kCPU, torch::kDouble).contiguous();
  torch::Tensor out = torch::empty_like(in);
  const double* src = in.data_ptr<double>();
  double* dst = out.data_ptr<double>();
  const auto& off = packed.host_offsets();
  for (size_t b = 0; b + 1 < off.size(); ++b) {
    double running = 0.0;
    for (int64_t t = off[b + 1] - 1; t >= off[b]; --t) {
      running = src[t] + gamma * running;
      dst[t] = running;
    }
  }
  return out.to(x.options());
}

}  // namespace aspen::algo
