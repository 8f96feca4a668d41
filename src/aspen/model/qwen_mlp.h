// Gated MLP of a Qwen decoder layer: down_proj(silu(gate_proj(x)) * up_proj(x)).
// The same module is each expert of a sparse MoE block (qwen_moe_block.h), with
// I = moe_intermediate_size.
//
// Shapes: T = tokens, C = hidden_size, I = intermediate_size (or the expert width).
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

#include <string>

#include "aspen/io/hf_config.h"
#include "aspen/model/fused_projection.h"
#include "aspen/model/imports.h"
#include "aspen/model/lora.h"
#include "aspen/parallel/tensor_parallel.h"

namespace aspen::model {

struct QwenMLPImpl : torch::nn::Module {
  // The dense MLP of a layer (width intermediate_size).
  explicit QwenMLPImpl(const ModelConfig& config, const TensorParallel& tp = {});
  // An MLP of width `intermediate` (the full, unsharded width) laid out as the HF
  // parameter `layout_name` says (model/tp_layout.h): an expert of a MoE block.
  QwenMLPImpl(const ModelConfig& config, const TensorParallel& tp, int64_t intermediate,
              const std::string& layout_name);

  torch::Tensor forward(const torch::Tensor& x);
  // The rank-local part: x already in the TP region -> this rank's partial sum of
  // the output (the caller reduces). forward = reduce(forward_local(copy(x))).
  // With gate/up fused and no gradient wanted, one GEMM computes both.
  torch::Tensor forward_local(const torch::Tensor& x_tp);

  // Lays gate_proj/up_proj out in one weight matrix for inference; see FusedProjection
  // for what keeps and what breaks the layout. Idempotent.
  void fuse_projections();

  // Registers LoRA adapters inside the projections `options` targets (model/lora.h);
  // `layout_name` as for the constructor (the TP layouts).
  void attach_lora(const LoraOptions& options, const std::shared_ptr<const LoraSwitch>& on,
                   const ModelConfig& config, const std::string& layout_name);

  torch::nn::Linear gate_proj{nullptr};
  torch::nn::Linear up_proj{nullptr};
  torch::nn::Linear down_proj{nullptr};
  TensorParallel tp;
  // The projections' adapters (model/lora.h); empty (the identity) without LoRA.
  LoraBranch gate_lora, up_lora, down_lora;

 private:
  FusedProjection gate_up_;
};
TORCH_MODULE(QwenMLP);

}  // namespace aspen::model
