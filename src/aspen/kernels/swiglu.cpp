#include "aspen/kernels/swiglu.h"

#include <torch/autograd.h>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class SwigluFunction : public torch::autograd::Function<SwigluFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& gate,
                               const torch::Tensor& up) {
    ctx->save_for_backward({gate, up});
    return torch::silu(gate) * up;
  }

  // d/dg silu(g) = s * (1 + g * (1 - s)), s = sigmoid(g).
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& gate = saved[0];
    const torch::Tensor& up = saved[1];
    const torch::Tensor& grad = grad_outputs[0];
    torch::Tensor s = torch::sigmoid(gate);
    torch::Tensor grad_gate = grad * up * s * (1 + gate * (1 - s));
    torch::Tensor grad_up = grad * gate * s;
    return {grad_gate, grad_up};
  }
};

}  // namespace

torch::Tensor swiglu(const torch::Tensor& gate, const torch::Tensor& up) {
  TORCH_CHECK(gate.sizes() == up.sizes(), "swiglu: gate ", gate.sizes(), " and up ", up.sizes(),
              " differ");
  return SwigluFunction::apply(gate, up);
}

torch::Tensor swiglu_reference(const torch::Tensor& gate, const torch::Tensor& up) {
  return gate * torch::sigmoid(gate) * up;
}

}  // namespace aspen::kernels
