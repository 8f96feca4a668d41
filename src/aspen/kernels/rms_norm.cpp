#include "aspen/kernels/rms_norm.h"
#include "aspen/kernels/imports.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <cmath>
#include <optional>

namespace aspen::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Statistics are computed in fp32, or in fp64 for fp64 inputs (tests compare in fp64).
torch::ScalarType stat_dtype(const torch::Tensor& x) {
  return x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// The fp32 backward loop reads x and grad as contiguous [rows, D].
bool use_cpu_backward_loop(const torch::Tensor& x, const torch::Tensor& weight) {
  return x.device().is_cpu() && weight.device().is_cpu() && x.scalar_type() == torch::kFloat &&
         weight.scalar_type() == torch::kFloat && x.is_contiguous() && weight.is_contiguous();
}

// Rows of x as the forward loop walks them: x is [outer, inner, D] (fewer dims pad with
// size 1) with unit stride along D. Covers the per-head views of a fused q/k/v output
// ([T, H, D], rows strided by the fused width) without a copy.
struct RowLayout {
  int64_t outer = 1, inner = 1, outer_stride = 0, inner_stride = 0;
};

std::optional<RowLayout> row_layout(const torch::Tensor& x) {
  const int64_t dim = x.size(-1);
  if (x.stride(-1) != 1 && dim > 1) return std::nullopt;
  RowLayout rows;
  if (x.dim() == 2) {
    rows.outer = x.size(0), rows.outer_stride = x.stride(0);
  } else if (x.dim() == 3) {
    rows.outer = x.size(0), rows.outer_stride = x.stride(0);
    rows.inner = x.size(1), rows.inner_stride = x.stride(1);
  } else if (x.dim() > 3) {
    if (!x.is_contiguous()) return std::nullopt;
    rows.outer = dim == 0 ? 0 : x.numel() / dim, rows.outer_stride = dim;
  }
  return rows;
}

// The forward loop: fp32 or bf16 CPU tensors of one dtype (x's rows as row_layout).
bool use_cpu_forward_loop(const torch::Tensor& x, const torch::Tensor& weight) {
  const auto dtype = x.scalar_type();
  return x.device().is_cpu() && weight.device().is_cpu() &&
         (dtype == torch::kFloat || dtype == torch::kBFloat16) && weight.scalar_type() == dtype &&
         weight.is_contiguous() && row_layout(x).has_value();
}

// Single pass per row: sum of squares in fp32, then scale. The normalised value is
// rounded to x's dtype before the weight multiply, whose product is rounded again:
// the two roundings of the composed formula (and of HF) for bf16; no-ops for fp32.
// Returns (y contiguous, inv_rms[rows] fp32).
template <typename scalar_t>
std::pair<torch::Tensor, torch::Tensor> forward_cpu(const torch::Tensor& x,
                                                    const torch::Tensor& weight, double eps) {
  const int64_t dim = x.size(-1);
  const RowLayout layout = *row_layout(x);
  const int64_t rows = layout.outer * layout.inner;
  torch::Tensor y = torch::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  torch::Tensor inv_rms = torch::empty({rows}, x.options().dtype(torch::kFloat));
  const scalar_t* xp = x.data_ptr<scalar_t>();
  const scalar_t* wp = weight.data_ptr<scalar_t>();
  scalar_t* yp = y.data_ptr<scalar_t>();
  float* ip = inv_rms.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const scalar_t* xr =
          xp + (r / layout.inner) * layout.outer_stride + (r % layout.inner) * layout.inner_stride;
      scalar_t* yr = yp + r * dim;
      float sum = 0.f;
      for (int64_t i = 0; i < dim; ++i) {
        const float v = static_cast<float>(xr[i]);
        sum += v * v;
      }
      const float inv = 1.f / std::sqrt(sum / static_cast<float>(dim) + static_cast<float>(eps));
      ip[r] = inv;
      for (int64_t i = 0; i < dim; ++i) {
        const scalar_t normed = static_cast<scalar_t>(static_cast<float>(xr[i]) * inv);
        yr[i] = static_cast<scalar_t>(static_cast<float>(wp[i]) * static_cast<float>(normed));
      }
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
    if (use_cpu_forward_loop(x, weight)) {
      std::tie(y, inv_rms) = x.scalar_type() == torch::kFloat
                                 ? forward_cpu<float>(x, weight, eps)
                                 : forward_cpu<c10::BFloat16>(x, weight, eps);
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
    if (use_cpu_backward_loop(x, weight) && grad.scalar_type() == torch::kFloat) {
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

}  // namespace aspen::kernels
