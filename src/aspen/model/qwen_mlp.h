// Gated MLP of a Qwen decoder layer: down_proj(silu(gate_proj(x)) * up_proj(x)).
//
// Shapes: T = tokens, C = hidden_size, I = intermediate_size.
// Parameters (HF names under "mlp."): gate_proj.weight [I, C], up_proj.weight [I, C],
// down_proj.weight [C, I]; no biases. forward: x [T, C] -> [T, C].
// Thread safety: forward mutates nothing.
#pragma once

#include <torch/torch.h>

#include "aspen/io/hf_config.h"

namespace aspen {

struct QwenMLPImpl : torch::nn::Module {
  explicit QwenMLPImpl(const ModelConfig& config);

  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear gate_proj{nullptr};
  torch::nn::Linear up_proj{nullptr};
  torch::nn::Linear down_proj{nullptr};
};
TORCH_MODULE(QwenMLP);

}  // namespace aspen
