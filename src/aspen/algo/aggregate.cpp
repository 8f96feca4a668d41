#include "aspen/algo/aggregate.h"

#include <torch/torch.h>

#include <algorithm>

#include "aspen/algo/imports.h"
#include "aspen/util/error.h"

namespace aspen::algo {

std::string agg_mode_name(AggMode mode) {
  switch (mode) {
    case AggMode::kTokenMean:
      return "token-mean";
    case AggMode::kSeqMeanTokenMean:
      return "seq-mean-token-mean";
    case AggMode::kSeqMeanTokenSum:
      return "seq-mean-token-sum";
    case AggMode::kSeqMeanTokenSumNorm:
      return "seq-mean-token-sum-norm";
  }
  TORCH_CHECK(false, "unhandled AggMode");
}

namespace {

double denominator(const std::optional<double>& global, int64_t local, const char* key) {
  if (global) {
    check_input(*global > 0, std::string("global denominator must be > 0"), key);
    return *global;
  }
  // An empty batch has a zero sum; dividing by 1 keeps the result 0 instead of NaN.
  return static_cast<double>(std::max<int64_t>(local, 1));
}

}  // namespace

torch::Tensor aggregate(const torch::Tensor& per_token, const PackedSeqs& packed,
                        const AggOptions& options) {
  packed.check_tokens(per_token, "aggregate: per_token");
  // Environment tokens contribute exactly 0 (value and gradient) and are not counted.
  const torch::Tensor l = packed.zero_masked(per_token);
  if (options.mode == AggMode::kTokenMean) {
    return l.sum() /
           denominator(options.global_tokens, packed.num_loss_tokens(), "aggregate: global_tokens");
  }
  const double seqs = denominator(options.global_seqs, packed.num_seqs(), "aggregate: global_seqs");
  torch::Tensor seq_sums = segment_sum(l, packed);  // [B]
  switch (options.mode) {
    case AggMode::kSeqMeanTokenMean: {
      torch::Tensor len = packed.loss_lengths().clamp_min(1).to(per_token.scalar_type());
      return (seq_sums / len).sum() / seqs;
    }
    case AggMode::kSeqMeanTokenSum:
      return seq_sums.sum() / seqs;
    case AggMode::kSeqMeanTokenSumNorm:
      check_input(options.norm_length > 0, "seq-mean-token-sum-norm needs a positive norm_length",
                  "aggregate: norm_length", "set it to the maximum response length");
      return seq_sums.sum() / (seqs * options.norm_length);
    case AggMode::kTokenMean:
      break;
  }
  TORCH_CHECK(false, "unhandled AggMode");
}

torch::Tensor token_mean_metric(const torch::Tensor& per_token) {
  torch::Tensor x = per_token.detach();
  if (x.numel() == 0) return torch::zeros({}, x.options());
  return x.mean();
}

torch::Tensor token_mean_metric(const torch::Tensor& per_token, const PackedSeqs& packed) {
  if (!packed.has_loss_mask()) return token_mean_metric(per_token);
  packed.check_tokens(per_token, "token_mean_metric: per_token");
  if (packed.num_loss_tokens() == 0) return torch::zeros({}, per_token.detach().options());
  return packed.zero_masked(per_token.detach()).sum() /
         static_cast<double>(packed.num_loss_tokens());
}

}  // namespace aspen::algo
