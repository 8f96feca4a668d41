#include "aspen/model/qwen_mlp.h"

#include "aspen/kernels/swiglu.h"

namespace aspen {

QwenMLPImpl::QwenMLPImpl(const ModelConfig& config) {
  const int64_t hidden = config.hidden_size;
  const int64_t inter = config.intermediate_size;
  gate_proj = register_module(
      "gate_proj", torch::nn::Linear(torch::nn::LinearOptions(hidden, inter).bias(false)));
  up_proj = register_module("up_proj",
                            torch::nn::Linear(torch::nn::LinearOptions(hidden, inter).bias(false)));
  down_proj = register_module(
      "down_proj", torch::nn::Linear(torch::nn::LinearOptions(inter, hidden).bias(false)));
}

torch::Tensor QwenMLPImpl::forward(const torch::Tensor& x) {
  return down_proj(swiglu(gate_proj(x), up_proj(x)));
}

}  // namespace aspen
