#include "aspen/algo/value_loss.h"

#include <torch/torch.h>

#include "aspen/algo/imports.h"
#include "aspen/util/error.h"

namespace aspen::algo {

ValueLossResult value_loss(const torch::Tensor& values, const torch::Tensor& old_values,
                           const torch::Tensor& returns, const PackedSeqs& packed,
                           double clip_range, const AggOptions& agg) {
  packed.check_tokens(values, "value_loss: values");
  packed.check_tokens(old_values, "value_loss: old_values");
  packed.check_tokens(returns, "value_loss: returns");
  check_input(clip_range >= 0, "value clip range must be >= 0", "value_loss: clip_range");
  const auto dtype = values.scalar_type();
  // Environment tokens (loss mask): targets equal to the prediction, so nothing there
  // can reach the loss or a gradient; aggregate() then skips them.
  torch::Tensor v_old = packed.fill_masked(old_values.detach().to(dtype), values.detach());
  torch::Tensor ret = packed.fill_masked(returns.detach().to(dtype), values.detach());
  torch::Tensor v_clip = torch::clamp(values, v_old - clip_range, v_old + clip_range);
  torch::Tensor l1 = (values - ret).pow(2);
  torch::Tensor l2 = (v_clip - ret).pow(2);
  ValueLossResult out;
  out.loss = 0.5 * aggregate(torch::max(l1, l2), packed, agg);
  out.clip_frac = token_mean_metric((l2 > l1).to(dtype), packed);
  return out;
}

}  // namespace aspen::algo
