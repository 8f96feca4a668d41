// Sparse mixture-of-experts MLP of a Qwen3-MoE decoder layer (transformers'
// Qwen3MoeSparseMoeBlock):
//   (w, e) = top-k of softmax(gate(x))            (model/moe_routing.h)
//   out[t] = sum_j w[t, j] * expert_{e[t, j]}(x[t])
// where every expert is a gated MLP (qwen_mlp.h) of width moe_intermediate_size.
//
// Kernel: tokens are grouped by expert (one stable sort of the T*k choices), so each
// expert with work runs ONE gate/up/down GEMM chain over all of its tokens - no loop
// over tokens, and experts no token chose cost nothing. The combine is one
// index_add. Composed ops only, so forward and backward run on any device.
//
// Shapes: T = tokens, C = hidden_size, E = num_experts, k = num_experts_per_tok,
// I = moe_intermediate_size. forward: x [T, C] -> [T, C].
// Parameters (HF names under "mlp."): gate.weight [E, C] (the router, no bias),
// experts.{j}.{gate,up}_proj.weight [I, C], experts.{j}.down_proj.weight [C, I].
// Tensor parallelism (tp.size = t > 1): the router is replicated; every expert is
// column- then row-parallel over I/t columns (tp_layout.h). The experts' partial
// outputs are summed over ranks (one all-reduce of the [T*k, C] grouped rows) before
// the routing weights multiply them, so the router's gradient is the full one on
// every rank.
// Routing record: with a non-null `log`, forward appends this layer's routing
// statistics (for the load-balancing loss).
// Thread safety: forward mutates nothing but `log`.
#pragma once

#include <torch/torch.h>

#include "aspen/io/hf_config.h"
#include "aspen/model/moe_routing.h"
#include "aspen/model/qwen_mlp.h"
#include "aspen/parallel/tensor_parallel.h"

namespace aspen {

struct QwenSparseMoeBlockImpl : torch::nn::Module {
  QwenSparseMoeBlockImpl(const ModelConfig& config, const TensorParallel& tp = {});

  torch::Tensor forward(const torch::Tensor& x, MoeRoutingLog* log = nullptr);

  int64_t top_k = 0;
  bool norm_topk_prob = false;
  torch::nn::Linear gate{nullptr};  // the router [E, C]
  torch::nn::ModuleList experts{nullptr};
  TensorParallel tp;
};
TORCH_MODULE(QwenSparseMoeBlock);

}  // namespace aspen
