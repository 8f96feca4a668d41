#include "aspen/algo/rollout_correction.h"

#include <torch/torch.h>

#include "aspen/algo/aggregate.h"
#include "aspen/algo/imports.h"
#include "aspen/util/error.h"

namespace aspen::algo {
namespace {

constexpr double kMaxCorrectionLogRatio = 20.0;  // exp(20) ~ 5e8: verl's safety bound

void check_options(const RolloutCorrectionOptions& o) {
  check_input(o.is_level == RolloutIsLevel::kNone || o.is_threshold > 0, "must be > 0",
              "rollout correction: is_threshold");
  if (o.rs_level != RolloutRsLevel::kNone) {
    check_input(o.rs_upper > 0, "must be > 0", "rollout correction: rs_upper");
    check_input(o.rs_lower >= 0 && o.rs_lower <= o.rs_upper, "must be in [0, rs_upper]",
                "rollout correction: rs_lower");
  }
}

}  // namespace

RolloutCorrection rollout_correction(const torch::Tensor& old_logprobs,
                                     const torch::Tensor& behaviour_logprobs,
                                     const PackedSeqs& packed,
                                     const RolloutCorrectionOptions& o) {
  check_options(o);
  packed.check_tokens(old_logprobs, "rollout correction: old_logprobs");
  packed.check_tokens(behaviour_logprobs, "rollout correction: behaviour_logprobs");
  torch::NoGradGuard no_grad;
  const auto dtype = old_logprobs.scalar_type();
  // Environment tokens (loss mask) get d = 0: ratio 1, no part in a sequence ratio.
  const torch::Tensor d = packed.zero_masked(
      (old_logprobs.detach() - behaviour_logprobs.detach().to(dtype)).clamp(-kMaxCorrectionLogRatio, kMaxCorrectionLogRatio));
  const torch::Tensor rho = d.exp();
  // Sequence sums in the token dtype; an empty sequence has sum 0 (ratio 1).
  const torch::Tensor seq_log = segment_sum(d, packed);  // [B]
  const torch::Tensor len = packed.loss_lengths().clamp_min(1).to(dtype);
  auto per_sequence = [&](const torch::Tensor& log_ratio) {
    return broadcast_rows(log_ratio.clamp(-kMaxCorrectionLogRatio, kMaxCorrectionLogRatio).exp(), packed);
  };

  RolloutCorrection out;
  torch::Tensor ratio;  // the IS level's ratio, per token
  switch (o.is_level) {
    case RolloutIsLevel::kNone: ratio = torch::ones_like(rho); break;
    case RolloutIsLevel::kToken: ratio = rho; break;
    case RolloutIsLevel::kSequence: ratio = per_sequence(seq_log); break;
  }
  torch::Tensor truncated = torch::zeros_like(rho, torch::kBool);
  torch::Tensor w = ratio;
  if (o.is_level != RolloutIsLevel::kNone) {
    truncated = ratio > o.is_threshold;
    w = ratio.clamp_max(o.is_threshold);
  }
  torch::Tensor keep = torch::ones_like(rho, torch::kBool);
  if (o.rs_level != RolloutRsLevel::kNone) {
    torch::Tensor rs_ratio;
    switch (o.rs_level) {
      case RolloutRsLevel::kToken: rs_ratio = rho; break;
      case RolloutRsLevel::kSequence: rs_ratio = per_sequence(seq_log); break;
      case RolloutRsLevel::kGeometric: rs_ratio = per_sequence(seq_log / len); break;
      case RolloutRsLevel::kNone: break;
    }
    keep = (rs_ratio >= o.rs_lower) & (rs_ratio <= o.rs_upper);
  }
  out.weights = torch::where(keep, w, torch::zeros_like(w));
  out.changed = truncated | ~keep;
  if (packed.has_loss_mask()) out.changed = out.changed & packed.loss_mask().to(rho.device());
  out.metrics.is_mean = token_mean_metric(w, packed);
  out.metrics.ratio_mean = token_mean_metric(rho, packed);
  const torch::Tensor model_rho = packed.compact(rho);  // the extremes over model tokens
  out.metrics.ratio_max = model_rho.numel() > 0 ? model_rho.max() : torch::ones({}, rho.options());
  out.metrics.ratio_min = model_rho.numel() > 0 ? model_rho.min() : torch::ones({}, rho.options());
  out.metrics.truncated_frac = token_mean_metric(truncated.to(dtype), packed);
  out.metrics.masked_frac = token_mean_metric((~keep).to(dtype), packed);
  out.metrics.kl_k3 = token_mean_metric(rho - 1.0 - d, packed);
  return out;
}

}  // namespace aspen::algo
