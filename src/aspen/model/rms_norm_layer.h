// RMSNorm layer holding its HF parameter "weight" [D]; the math is
// kernels/rms_norm.h (fp32 statistics, cast back before the weight multiply).
// Thread safety: forward is safe to call concurrently (it mutates nothing).
#pragma once

#include <torch/torch.h>

#include "aspen/kernels/rms_norm.h"
#include "aspen/model/imports.h"

namespace aspen::model {

struct RMSNormImpl : torch::nn::Module {
  RMSNormImpl(int64_t dim, double eps)
      : weight(register_parameter("weight", torch::ones({dim}))), eps(eps) {}

  // x [N..., D] -> [N..., D]
  torch::Tensor forward(const torch::Tensor& x) { return rms_norm(x, weight, eps); }

  torch::Tensor weight;  // [D]
  double eps;
};
TORCH_MODULE(RMSNorm);

}  // namespace aspen::model
