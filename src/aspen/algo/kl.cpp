#include "aspen/algo/kl.h"

#include <torch/torch.h>

#include "aspen/algo/imports.h"
#include "aspen/util/error.h"

namespace aspen::algo {

torch::Tensor kl_penalty(const torch::Tensor& logprobs, const torch::Tensor& ref_logprobs,
                         KlEstimator estimator) {
  check_input(
      logprobs.defined() && ref_logprobs.defined() && logprobs.sizes() == ref_logprobs.sizes(),
      "logprobs and ref_logprobs must have the same shape", "kl_penalty");
  torch::Tensor d = logprobs - ref_logprobs;
  switch (estimator) {
    case KlEstimator::kK1:
      return d;
    case KlEstimator::kAbs:
      return d.abs();
    case KlEstimator::kK2:
      return 0.5 * d * d;
    case KlEstimator::kK3: {
      // With x = ref - logp = log(ref/pi): k3 = exp(x) - x - 1. The clamps keep
      // exp finite and bound the rare huge values, as verl does.
      torch::Tensor x = (-d).clamp(-20.0, 20.0);
      return (x.exp() - x - 1.0).clamp(-10.0, 10.0);
    }
  }
  TORCH_CHECK(false, "unhandled KlEstimator");
}

torch::Tensor kl_loss(const torch::Tensor& logprobs, const torch::Tensor& ref_logprobs,
                      const PackedSeqs& packed, KlEstimator estimator, const AggOptions& agg) {
  packed.check_tokens(logprobs, "kl_loss: logprobs");
  // Environment tokens: the reference set equal to the policy (KL 0, finite gradient
  // whatever the column holds there); aggregate() then skips them.
  const torch::Tensor ref = packed.fill_masked(ref_logprobs, logprobs.detach());
  return aggregate(kl_penalty(logprobs, ref, estimator), packed, agg);
}

torch::Tensor entropy_loss(const torch::Tensor& entropy, const PackedSeqs& packed,
                           const AggOptions& agg) {
  return aggregate(entropy, packed, agg);
}

}  // namespace aspen::algo
