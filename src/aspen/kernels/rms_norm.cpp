#include "aspen/kernels/rms_norm.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <cmath>

namespace aspen {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Statistics are computed in fp32, or in fp64 for fp64 inputs (tests compare in fp64).
torch::ScalarType stat_dtype(const torch::Tensor& x) {
  return x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

bool use_cpu_loop(const torch::Tensor& x, const torch::Tensor& weight) {
  return x.device().is_cpu() && weight.device().is_cpu() && x.scalar_type() == torch::kFloat &&
         weight.scalar_type() == torch::kFloat && x.is_contiguous() && weight.is_contiguous();
}

// Single pass per row: sum of squares, then scale. Returns (y, inv_rms[rows]).
std::pair<torch::Tensor, torch::Tensor> forward_cpu(const torch::Tensor& x,
                                                    const torch::Tensor& weight, double eps) {
  const int64_t dim = x.size(-1);
  const int64_t rows = dim == 0 ? 0 : x.numel() / dim;
  torch::Tensor y = torch::empty_like(x);
  torch::Tensor inv_rms = torch::empty({rows}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  float* ip = inv_rms.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xp + r * dim;
      float* yr = yp + r * dim;
      float sum = 0.f;
      for (int64_t i = 0; i < dim; ++i) sum += xr[i] * xr[i];
      const float inv = 1.f / std::sqrt(sum / static_cast<float>(dim) + static_cast<float>(eps));
      ip[r] = inv;
      for (int64_t i = 0; i < dim; ++i) yr[i] = wp[i] * (xr[i] * inv);
    }
  });
  return {y, inv_rms};
}

// grad_x = inv * (g*w - n * mean(g*w*n)), grad_w = sum_rows g*n, with n = x*inv.
std::pair<torch::Tensor, torch::Tensor> backward_cpu(const torch::Tensor& grad,
                                                     const torch::Tensor& x,
                                                     const torch::Tensor& weight,
                                                     const torch::Tensor& inv_rms) {
  const int64_t dim = x.size(-1);
  const int64_t rows = inv_rms.numel();
  torch::Tensor g = grad.contiguous();
  torch::Tensor grad_x = torch::empty_like(x);
  const float* gp = g.data_ptr<float>();
  const float* xp = x.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  const float* ip = inv_rms.data_ptr<float>();
  float* gxp = grad_x.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* gr = gp + r * dim;
      const float* xr = xp + r * dim;
      const float inv = ip[r];
      float dot = 0.f;
      for (int64_t i = 0; i < dim; ++i) dot += gr[i] * wp[i] * xr[i] * inv;
      const float mean = dot / static_cast<float>(dim);
      float* out = gxp + r * dim;
      for (int64_t i = 0; i < dim; ++i) out[i] = inv * (gr[i] * wp[i] - xr[i] * inv * mean);
    }
  });
  // The weight gradient is a column reduction: one GEMV-like op beats a hand loop.
  torch::Tensor normed = x.view({rows, dim}) * inv_rms.unsqueeze(1);
  torch::Tensor grad_w = (g.view({rows, dim}) * normed).sum(0);
  return {grad_x, grad_w};
}

class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, double eps) {
    torch::Tensor y;
    torch::Tensor inv_rms;
    if (use_cpu_loop(x, weight)) {
      std::tie(y, inv_rms) = forward_cpu(x, weight, eps);
    } else {
      torch::Tensor xf = x.to(stat_dtype(x));
      inv_rms = torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps).squeeze(-1);
      y = weight * (xf * inv_rms.unsqueeze(-1)).to(x.scalar_type());
      inv_rms = inv_rms.reshape({-1});
    }
    ctx->save_for_backward({x, weight, inv_rms});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& inv_rms = saved[2];
    const torch::Tensor& grad = grad_outputs[0];
    if (use_cpu_loop(x, weight) && grad.scalar_type() == torch::kFloat) {
      auto grads = backward_cpu(grad, x, weight, inv_rms);
      return {grads.first, grads.second, torch::Tensor()};
    }
    const int64_t dim = x.size(-1);
    torch::Tensor xf = x.to(stat_dtype(x)).reshape({-1, dim});
    torch::Tensor gf = grad.to(stat_dtype(x)).reshape({-1, dim});
    torch::Tensor inv = inv_rms.unsqueeze(1);
    torch::Tensor normed = xf * inv;
    // The weight sees the normalised value after its cast to x's dtype, as in forward.
    torch::Tensor grad_w = (gf * normed.to(x.scalar_type()).to(stat_dtype(x))).sum(0);
    torch::Tensor gn = gf * weight.to(stat_dtype(x));
    torch::Tensor grad_x = inv * (gn - normed * (gn * normed).mean(-1, /*keepdim=*/true));
    return {grad_x.view(x.sizes()).to(x.scalar_type()), grad_w.to(weight.scalar_type()),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && x.size(-1) == weight.size(0),
              "rms_norm: x [..., D] and weight [D] expected, got ", x.sizes(), " and ",
              weight.sizes());
  return RmsNormFunction::apply(x, weight, eps);
}

torch::Tensor rms_norm_reference(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
  torch::Tensor xf = x.to(stat_dtype(x));
  torch::Tensor normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.scalar_type());
}

}  // namespace aspen
