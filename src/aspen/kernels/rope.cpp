#include "aspen/kernels/rope.h"
#include "aspen/kernels/imports.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>

namespace aspen::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::ScalarType compute_dtype(const torch::Tensor& x) {
  return x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// Rotates each (x1, x2) pair of halves by the angle whose cos/sin are given:
//   (x1, x2) -> (x1*cos - x2*sin, x2*cos + x1*sin).
// sin_sign = -1 rotates backwards, which is the transpose used by backward.
torch::Tensor rotate(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                     double sin_sign) {
  const auto dtype = compute_dtype(x);
  const int64_t half = x.size(-1) / 2;
  torch::Tensor xf = x.to(dtype);
  torch::Tensor c = cos.to(dtype).unsqueeze(1);  // [T, 1, D/2] broadcasts over heads
  torch::Tensor s = sin.to(dtype).unsqueeze(1) * sin_sign;
  torch::Tensor x1 = xf.narrow(-1, 0, half);
  torch::Tensor x2 = xf.narrow(-1, half, half);
  torch::Tensor out = torch::cat({x1 * c - x2 * s, x2 * c + x1 * s}, -1);
  return out.to(x.scalar_type());
}

// The same rotation as one CPU pass for fp32/bf16 x [T, H, D] with unit stride along D
// (rows may be strided: the per-head view of a fused q/k/v output) and fp32 tables:
// each pair is rotated in fp32 and rounded once to x's dtype, as rotate() does.
bool use_rope_cpu_loop(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  return x.device().is_cpu() && (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16) &&
         x.stride(2) == 1 && cos.scalar_type() == torch::kFloat && sin.scalar_type() == torch::kFloat &&
         cos.device().is_cpu() && sin.device().is_cpu() && cos.is_contiguous() && sin.is_contiguous();
}

template <typename scalar_t>
torch::Tensor rotate_cpu(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                         float sin_sign) {
  const int64_t tokens = x.size(0), heads = x.size(1), dim = x.size(2), half = dim / 2;
  const int64_t token_stride = x.stride(0), head_stride = x.stride(1);
  torch::Tensor out = torch::empty({tokens, heads, dim}, x.options());
  const scalar_t* xp = x.data_ptr<scalar_t>();
  const float* cp = cos.data_ptr<float>();
  const float* sp = sin.data_ptr<float>();
  scalar_t* op = out.data_ptr<scalar_t>();
  at::parallel_for(0, tokens * heads, 64, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t t = row / heads, h = row % heads;
      const scalar_t* xr = xp + t * token_stride + h * head_stride;
      const float* c = cp + t * half;
      const float* sn = sp + t * half;
      scalar_t* o = op + row * dim;
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = static_cast<float>(xr[i]), x2 = static_cast<float>(xr[i + half]);
        const float s = sn[i] * sin_sign;
        o[i] = static_cast<scalar_t>(x1 * c[i] - x2 * s);
        o[i + half] = static_cast<scalar_t>(x2 * c[i] + x1 * s);
      }
    }
  });
  return out;
}

torch::Tensor rotate_any(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                         double sin_sign) {
  if (!use_rope_cpu_loop(x, cos, sin)) return rotate(x, cos, sin, sin_sign);
  const auto sign = static_cast<float>(sin_sign);
  return x.scalar_type() == torch::kFloat ? rotate_cpu<float>(x, cos, sin, sign)
                                          : rotate_cpu<c10::BFloat16>(x, cos, sin, sign);
}

class RopeFunction : public torch::autograd::Function<RopeFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& cos, const torch::Tensor& sin) {
    ctx->save_for_backward({cos, sin});
    return rotate_any(x, cos, sin, 1.0);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    return {rotate_any(grad_outputs[0], saved[0], saved[1], -1.0), torch::Tensor(), torch::Tensor()};
  }
};

void check_shapes(const torch::Tensor& x, const RopeTable& table) {
  TORCH_CHECK(x.dim() == 3 && x.size(-1) % 2 == 0,
              "apply_rope: x [T, H, D] with even D expected, got ", x.sizes());
  TORCH_CHECK(table.cos.dim() == 2 && table.cos.size(0) == x.size(0) &&
                  table.cos.size(1) * 2 == x.size(2) && table.sin.sizes() == table.cos.sizes(),
              "apply_rope: table [T, D/2] does not match x ", x.sizes());
}

}  // namespace

RopeTable make_rope_table(const torch::Tensor& positions, int64_t head_dim, double theta) {
  TORCH_CHECK(positions.dim() == 1 && head_dim > 0 && head_dim % 2 == 0,
              "make_rope_table: positions [T] and an even head_dim expected");
  auto float_opts = torch::TensorOptions().dtype(torch::kFloat).device(positions.device());
  // HF: 1 / theta ** (arange(0, D, 2).float() / D), all in fp32.
  torch::Tensor exponent =
      torch::arange(0, head_dim, 2, float_opts) / static_cast<double>(head_dim);
  torch::Tensor inv_freq = 1.0 / torch::pow(torch::scalar_tensor(theta, float_opts), exponent);
  return make_rope_table(positions, inv_freq);
}

RopeTable make_rope_table(const torch::Tensor& positions, const torch::Tensor& inv_freq,
                          double scale) {
  TORCH_CHECK(positions.dim() == 1 && inv_freq.dim() == 1,
              "make_rope_table: positions [T] and inv_freq [D/2] expected");
  const torch::Tensor freqs = inv_freq.to(positions.device(), torch::kFloat);
  torch::Tensor angles = positions.to(torch::kFloat).unsqueeze(1) * freqs.unsqueeze(0);
  if (scale == 1.0) return RopeTable{angles.cos(), angles.sin()};
  return RopeTable{angles.cos() * scale, angles.sin() * scale};
}

torch::Tensor apply_rope(const torch::Tensor& x, const RopeTable& table) {
  check_shapes(x, table);
  return RopeFunction::apply(x, table.cos, table.sin);
}

torch::Tensor apply_rope_reference(const torch::Tensor& x, const RopeTable& table) {
  check_shapes(x, table);
  const auto dtype = compute_dtype(x);
  const int64_t half = x.size(-1) / 2;
  torch::Tensor cos = torch::cat({table.cos, table.cos}, -1).to(dtype).unsqueeze(1);
  torch::Tensor sin = torch::cat({table.sin, table.sin}, -1).to(dtype).unsqueeze(1);
  torch::Tensor xf = x.to(dtype);
  torch::Tensor rotated = torch::cat({-xf.narrow(-1, half, half), xf.narrow(-1, 0, half)}, -1);
  return (xf * cos + rotated * sin).to(x.scalar_type());
}

}  // namespace aspen::kernels
