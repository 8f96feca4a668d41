#include "aspen/algo/policy_loss.h"

#include <torch/torch.h>

#include "aspen/algo/imports.h"
#include "aspen/util/error.h"

namespace aspen::algo {
namespace {

constexpr double kMaxLogRatio = 20.0;  // exp(20) ~ 5e8: keeps the ratio finite

void check_options(const PolicyLossOptions& o) {
  check_input(o.clip_ratio_low >= 0 && o.clip_ratio_low <= 1, "clip_ratio_low must be in [0, 1]",
              "policy_loss: clip_ratio_low");
  check_input(o.clip_ratio_high >= 0, "clip_ratio_high must be >= 0",
              "policy_loss: clip_ratio_high");
  check_input(!o.clip_ratio_c || *o.clip_ratio_c > 1.0, "dual-clip constant must be > 1",
              "policy_loss: clip_ratio_c");
  if (o.correction == OffPolicyCorrection::kTruncatedIS) {
    check_input(o.correction_cap.has_value(), "truncated IS needs a cap",
                "policy_loss: correction_cap", "e.g. 2.0");
  }
  check_input(!o.correction_cap || *o.correction_cap > 0, "correction cap must be > 0",
              "policy_loss: correction_cap");
}

// log r_t, the (token or sequence) log-ratio used in the surrogate; see header.
torch::Tensor log_ratio(const torch::Tensor& logp, const torch::Tensor& token_log_ratio,
                        const PackedSeqs& packed, PolicyRatio kind) {
  if (kind == PolicyRatio::kToken) return token_log_ratio.clamp(-kMaxLogRatio, kMaxLogRatio);
  // Over the row's model tokens (environment tokens' log-ratios are 0 here).
  torch::Tensor len = packed.loss_lengths().clamp_min(1).to(logp.scalar_type());
  torch::Tensor seq_log_ratio = segment_sum(token_log_ratio.detach(), packed) / len;  // [B]
  torch::Tensor log_r = logp - logp.detach() + broadcast_rows(seq_log_ratio, packed);
  return log_r.clamp(-kMaxLogRatio, kMaxLogRatio);
}

}  // namespace

PolicyLossResult policy_loss(const PolicyLossInputs& in, const PackedSeqs& packed,
                             const PolicyLossOptions& o) {
  check_options(o);
  packed.check_tokens(in.logprobs, "policy_loss: logprobs");
  packed.check_tokens(in.old_logprobs, "policy_loss: old_logprobs");
  packed.check_tokens(in.advantages, "policy_loss: advantages");
  const torch::Tensor& logp = in.logprobs;
  const auto dtype = logp.scalar_type();
  // Environment tokens (loss mask): neutral inputs - ratio 1, advantage 0 - so that
  // whatever their columns hold cannot reach the loss, a gradient or a metric.
  torch::Tensor old = packed.fill_masked(in.old_logprobs.detach().to(dtype), logp.detach());
  torch::Tensor adv = packed.zero_masked(in.advantages.detach().to(dtype));

  torch::Tensor token_log_ratio = logp - old;
  torch::Tensor ratio = log_ratio(logp, token_log_ratio, packed, o.ratio).exp();
  torch::Tensor l1 = -adv * ratio;
  torch::Tensor l2 = -adv * ratio.clamp(1.0 - o.clip_ratio_low, 1.0 + o.clip_ratio_high);
  torch::Tensor per_token = torch::max(l1, l2);
  PolicyLossResult out;
  out.clip_frac = token_mean_metric((l2 > l1).to(dtype), packed);
  if (o.clip_ratio_c) {
    torch::Tensor l3 = -adv * *o.clip_ratio_c;
    torch::Tensor negative = adv < 0;
    out.dual_clip_frac = token_mean_metric((negative & (per_token > l3)).to(dtype), packed);
    per_token = torch::where(negative, torch::min(per_token, l3), per_token);
  } else {
    out.dual_clip_frac = torch::zeros({}, logp.options().requires_grad(false));
  }

  if (o.correction == OffPolicyCorrection::kNone) {
    out.correction_weight_mean = torch::ones({}, logp.options().requires_grad(false));
    out.correction_capped_frac = torch::zeros({}, logp.options().requires_grad(false));
  } else if (o.correction == OffPolicyCorrection::kRolloutCorrection) {
    packed.check_tokens(in.behaviour_logprobs, "policy_loss: behaviour_logprobs");
    RolloutCorrection rc = rollout_correction(old, in.behaviour_logprobs, packed, o.rollout);
    out.correction_weight_mean = token_mean_metric(rc.weights, packed);
    out.correction_capped_frac = token_mean_metric(rc.changed.to(dtype), packed);
    out.rollout = rc.metrics;
    per_token = per_token * rc.weights;
  } else {
    packed.check_tokens(in.behaviour_logprobs, "policy_loss: behaviour_logprobs");
    const torch::Tensor behaviour =
        packed.fill_masked(in.behaviour_logprobs.detach().to(dtype), old);
    torch::Tensor w = (old - behaviour).clamp(-kMaxLogRatio, kMaxLogRatio).exp();
    torch::Tensor capped = torch::zeros_like(w, torch::kBool);
    if (o.correction_cap) {
      capped = w > *o.correction_cap;
      w = o.correction == OffPolicyCorrection::kDecoupled
              ? torch::where(capped, torch::zeros_like(w), w)
              : w.clamp_max(*o.correction_cap);
    }
    out.correction_weight_mean = token_mean_metric(w, packed);
    out.correction_capped_frac = token_mean_metric(capped.to(dtype), packed);
    per_token = per_token * w;
  }

  out.loss = aggregate(per_token, packed, o.agg);
  torch::Tensor d = token_log_ratio.detach().clamp(-kMaxLogRatio, kMaxLogRatio);
  out.approx_kl_k1 = token_mean_metric(-d, packed);
  out.approx_kl_k3 = token_mean_metric(d.exp() - 1.0 - d, packed);
  out.ratio_mean = token_mean_metric(ratio, packed);
  return out;
}

}  // namespace aspen::algo
