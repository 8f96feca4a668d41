#include "aspen/algo/advantages.h"

#include <torch/torch.h>

#include "aspen/algo/groups.h"
#include "aspen/algo/imports.h"
#include "aspen/util/error.h"

namespace aspen::algo {
namespace {

// Checks the outcome-estimator inputs and returns the detached scores.
torch::Tensor checked_scores(const torch::Tensor& scores, const torch::Tensor& group_ids,
                             const PackedSeqs& packed, const std::string& who) {
  packed.check_rows(scores, who + ": scores");
  packed.check_rows(group_ids, who + ": group_ids");
  check_input(scores.is_floating_point(), "scores must be floating point", who + ": scores");
  return scores.detach();
}

// Group mean per row, with 0 for singleton groups (verl's convention: a lone
// response has no baseline).
torch::Tensor row_baseline(const torch::Tensor& s, const GroupIndex& g) {
  torch::Tensor mean = group_mean(s, g);
  mean = torch::where(g.counts > 1, mean, torch::zeros_like(mean));
  return mean.index_select(0, g.inverse);
}

}  // namespace

torch::Tensor whiten(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 1, "whiten expects a 1-D tensor");
  torch::Tensor v = x.detach();
  const int64_t n = v.numel();
  if (n == 0) return v.clone();
  torch::Tensor mean = v.mean();
  torch::Tensor centered = v - mean;
  torch::Tensor var =
      n > 1 ? (centered * centered).sum() / static_cast<double>(n - 1) : torch::zeros_like(mean);
  return centered * torch::rsqrt(var + 1e-8);
}

torch::Tensor whiten(const torch::Tensor& x, const PackedSeqs& packed) {
  if (!packed.has_loss_mask()) return whiten(x);
  packed.check_tokens(x, "whiten: x");
  return packed.expand(whiten(packed.compact(x)));
}

torch::Tensor grpo_advantages(const torch::Tensor& scores, const torch::Tensor& group_ids,
                              const PackedSeqs& packed, const GrpoOptions& options) {
  torch::Tensor s = checked_scores(scores, group_ids, packed, "grpo_advantages");
  GroupIndex g = GroupIndex::from_ids(group_ids);
  torch::Tensor single = g.counts == 1;  // [G]
  torch::Tensor mean = group_mean(s, g);
  mean = torch::where(single, torch::zeros_like(mean), mean);
  torch::Tensor adv = s - mean.index_select(0, g.inverse);
  if (options.norm_by_std) {
    torch::Tensor std = group_std(s, g);  // NaN for singletons, replaced by 1
    std = torch::where(single, torch::ones_like(std), std);
    adv = adv / (std.index_select(0, g.inverse) + options.eps);
  }
  return packed.zero_masked(broadcast_rows(adv, packed));
}

torch::Tensor rloo_advantages(const torch::Tensor& scores, const torch::Tensor& group_ids,
                              const PackedSeqs& packed) {
  torch::Tensor s = checked_scores(scores, group_ids, packed, "rloo_advantages");
  GroupIndex g = GroupIndex::from_ids(group_ids);
  torch::Tensor n = g.counts.index_select(0, g.inverse).to(s.scalar_type());  // [B]
  // s_b - (sum_g - s_b)/(n-1) = n/(n-1) * (s_b - mean_g); singletons keep s_b.
  torch::Tensor loo = (s - row_baseline(s, g)) * n / (n - 1).clamp_min(1);
  return packed.zero_masked(broadcast_rows(torch::where(n > 1, loo, s), packed));
}

torch::Tensor reinforce_pp_baseline_advantages(const torch::Tensor& scores,
                                               const torch::Tensor& group_ids,
                                               const PackedSeqs& packed) {
  torch::Tensor s = checked_scores(scores, group_ids, packed, "reinforce_pp_baseline_advantages");
  GroupIndex g = GroupIndex::from_ids(group_ids);
  return whiten(broadcast_rows(s - row_baseline(s, g), packed), packed);
}

torch::Tensor outcome_token_rewards(const torch::Tensor& scores, const PackedSeqs& packed,
                                    const torch::Tensor& kl, double kl_coef) {
  packed.check_rows(scores, "outcome_token_rewards: scores");
  torch::Tensor r = place_at_last_token(scores.detach(), packed);
  if (kl_coef != 0.0) {
    packed.check_tokens(kl, "outcome_token_rewards: kl");
    r = r - kl_coef * packed.zero_masked(kl.detach().to(r.scalar_type()));
  }
  return r;
}

AdvantagesAndReturns reinforce_pp_advantages(const torch::Tensor& token_rewards,
                                             const PackedSeqs& packed, double gamma) {
  packed.check_tokens(token_rewards, "reinforce_pp_advantages: token_rewards");
  torch::Tensor returns = discounted_reverse_cumsum(token_rewards, packed, gamma);
  return {whiten(returns, packed), returns};
}

AdvantagesAndReturns gae_advantages(const torch::Tensor& token_rewards, const torch::Tensor& values,
                                    const PackedSeqs& packed, double gamma, double lambda,
                                    bool whiten_advantages) {
  packed.check_tokens(token_rewards, "gae_advantages: token_rewards");
  packed.check_tokens(values, "gae_advantages: values");
  if (packed.has_loss_mask()) {
    // GAE over model tokens only: each row is replaced by its compacted sequence of
    // model tokens, so delta_t = r_t + gamma * V(next MODEL token) - V_t and the
    // recursion steps from one model token to the next. An environment token is not
    // an action: the policy did not choose it, so it has no advantage of its own, and
    // treating the observation as part of the transition to the next model token is
    // the MDP whose actions are the policy's tokens (verl's multi-turn GAE does the
    // same: it walks the response mask). Advantages and returns are 0 there.
    const AdvantagesAndReturns compact =
        gae_advantages(packed.compact(token_rewards), packed.compact(values), packed.compacted(),
                       gamma, lambda, whiten_advantages);
    return {packed.expand(compact.advantages), packed.expand(compact.returns)};
  }
  torch::Tensor r = token_rewards.detach();
  torch::Tensor v = values.detach().to(r.scalar_type());
  // V_{t+1} within the sequence; 0 after its last token.
  torch::Tensor next_v = torch::zeros_like(v);
  if (v.numel() > 1) next_v.slice(0, 0, -1).copy_(v.slice(0, 1));
  torch::Tensor last = packed.cu_seqlens().slice(0, 1) - 1;
  last = last.index_select(0, (packed.lengths() > 0).nonzero().squeeze(1));
  next_v.index_fill_(0, last, 0.0);
  torch::Tensor delta = r + gamma * next_v - v;
  torch::Tensor adv = discounted_reverse_cumsum(delta, packed, gamma * lambda);
  torch::Tensor returns = adv + v;
  return {whiten_advantages ? whiten(adv) : adv, returns};
}

}  // namespace aspen::algo
