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
  out.num_loss_tokens_ = out.num_tokens();
  return out;
}

PackedSeqs PackedSeqs::with_loss_mask(const torch::Tensor& mask) const {
  if (!mask.defined()) {
    PackedSeqs out = *this;
    out.loss_mask_ = torch::Tensor();
    out.loss_lengths_ = torch::Tensor();
    out.loss_token_index_ = torch::Tensor();
    out.num_loss_tokens_ = num_tokens();
    out.compacted_.reset();
    return out;
  }
  check_tokens(mask, "loss_mask");
  const torch::Tensor host = mask.detach().to(torch::kCPU, torch::kDouble);
  check_input(((host == 0) | (host == 1)).all().item<bool>(),
              "every entry must be 0 (environment token) or 1 (model token)", "loss_mask");
  PackedSeqs out = *this;
  const torch::Tensor keep = host != 0;
  out.loss_mask_ = keep.to(cu_seqlens_.device());
  out.loss_token_index_ = keep.nonzero().squeeze(1).to(cu_seqlens_.device());
  out.num_loss_tokens_ = out.loss_token_index_.size(0);
  std::vector<int64_t> model_lengths(static_cast<size_t>(num_seqs()), 0);
  const bool* k = keep.contiguous().data_ptr<bool>();
  for (int64_t b = 0; b < num_seqs(); ++b) {
    for (int64_t t = host_offsets_[b]; t < host_offsets_[b + 1]; ++t) model_lengths[b] += k[t];
  }
  out.compacted_ =
      std::make_shared<const PackedSeqs>(from_lengths(model_lengths, cu_seqlens_.device()));
  out.loss_lengths_ = out.compacted_->lengths();
  return out;
}

const PackedSeqs& PackedSeqs::compacted() const {
  return compacted_ ? *compacted_ : *this;
}

torch::Tensor PackedSeqs::compact(const torch::Tensor& x) const {
  if (!has_loss_mask()) return x;
  check_tokens(x, "compact: x");
  return x.index_select(0, loss_token_index_.to(x.device()));
}

torch::Tensor PackedSeqs::expand(const torch::Tensor& y) const {
  if (!has_loss_mask()) return y;
  compacted().check_tokens(y, "expand: y");
  return torch::zeros({num_tokens()}, y.options())
      .index_copy(0, loss_token_index_.to(y.device()), y);
}

torch::Tensor PackedSeqs::zero_masked(const torch::Tensor& x) const {
  if (!has_loss_mask()) return x;
  return torch::where(loss_mask_.to(x.device()), x, torch::zeros_like(x));
}

torch::Tensor PackedSeqs::fill_masked(const torch::Tensor& x, const torch::Tensor& fill) const {
  if (!has_loss_mask()) return x;
  return torch::where(loss_mask_.to(x.device()), x, fill.to(x.scalar_type()));
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
  // With a loss mask: the last MODEL token (an outcome is the policy's to earn).
  if (packed.has_loss_mask()) return packed.expand(place_at_last_token(per_row, packed.compacted()));
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
  if (packed.has_loss_mask()) {
    // Over each row's compacted model tokens: an environment token neither adds nor
    // discounts (the recurrence steps from one model token to the next) and gets 0.
    return packed.expand(
        discounted_reverse_cumsum(packed.compact(x), packed.compacted(), gamma));
  }
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
