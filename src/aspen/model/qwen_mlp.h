// Gated MLP of a Qwen decoder layer: down_proj(silu(gate_proj(x)) * up_proj(x)).
//
// Shapes: T = tokens, C = hidden_size, I = intermediate_size.
// Parameters (HF names under "mlp."): gate_proj.weight [I, C], up_proj.weight [I, C],
// down_proj.weight [C, I]; no biases. forward: x [T, C] -> [T, C].
// Tensor parallelism (tp.size = t > 1): gate/up are column-parallel and down_proj is
// row-parallel over I/t intermediate columns per rank (shapes [I/t, C] and [C, I/t]);
// the input goes through copy_to_tp_region and the output through
// reduce_from_tp_region: one all-reduce per direction. (Row-parallel needs no bias
// handling: Qwen's MLP has none.)
// Thread safety: forward mutates nothing (collective ordering: tp_collectives.h).
#pragma once

#include <torch/torch.h>

#include "aspen/io/hf_config.h"
#include "aspen/parallel/tensor_parallel.h"

namespace aspen {

struct QwenMLPImpl : torch::nn::Module {
  explicit QwenMLPImpl(const ModelConfig& config, const TensorParallel& tp = {});

  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear gate_proj{nullptr};
  torch::nn::Linear up_proj{nullptr};
  torch::nn::Linear down_proj{nullptr};
  TensorParallel tp;
};
TORCH_MODULE(QwenMLP);

}  // namespace aspen
