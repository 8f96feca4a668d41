// One pre-norm Qwen decoder layer:
//   h = x + self_attn(input_layernorm(x));  out = h + mlp(post_attention_layernorm(h)).
// self_attn is Qwen's GQA attention, or DeepSeek-V3's multi-head latent attention
// (mla_attention.h). mlp is the dense gated MLP, or in a sparse layer
// (ModelConfig::is_sparse_layer) the sparse MoE block (qwen_moe_block.h); both are
// registered as "mlp", as in HF checkpoints.
//
// Shapes: T = packed tokens, C = hidden_size. forward: x [T, C] -> [T, C].
// Parameters (HF names under "model.layers.{i}."): input_layernorm.weight [C],
// self_attn.* (qwen_attention.h), post_attention_layernorm.weight [C], mlp.* (qwen_mlp.h or
// qwen_moe_block.h).
// Tensor parallelism: attention and MLP are TP blocks (their headers); the residual
// stream and both norms are replicated, and their gradients are complete on every
// rank because the blocks' copy_to_tp_region already sums the input gradients.
// `log` (optional): a sparse layer appends its routing statistics (moe_routing.h).
// Thread safety: forward mutates nothing but `log`.
#pragma once

#include <torch/torch.h>

#include "aspen/io/hf_config.h"
#include "aspen/kernels/rope.h"
#include "aspen/model/imports.h"
#include "aspen/model/mla_attention.h"
#include "aspen/model/qwen_attention.h"
#include "aspen/model/qwen_mlp.h"
#include "aspen/model/qwen_moe_block.h"
#include "aspen/model/rms_norm_layer.h"
#include "aspen/parallel/tensor_parallel.h"

namespace aspen::model {

struct QwenDecoderLayerImpl : torch::nn::Module {
  // `index`: the layer's position in the model (decides dense or sparse).
  QwenDecoderLayerImpl(const ModelConfig& config, const TensorParallel& tp, int64_t index,
                       const ExpertParallel& ep = {});

  torch::Tensor forward(const torch::Tensor& x, const RopeTable& rope,
                        const torch::Tensor& cu_seqlens, MoeRoutingLog* log = nullptr);
  // Same layer over the paged KV cache (rollout); `layer` indexes the cache.
  torch::Tensor forward_paged(const torch::Tensor& x, const RopeTable& rope,
                              const PagedBatch& batch, int64_t layer,
                              MoeRoutingLog* log = nullptr);
  // Fuses the Qwen attention's q/k/v and the dense MLP's gate/up projections for
  // inference (model/fused_projection.h); MLA attention and MoE blocks keep theirs.
  void fuse_projections();
  // LoRA adapters on this layer's targeted projections (model/lora.h). aspen::Error
  // when an attention projection is targeted in an MLA layer (DeepSeek-V3's latent
  // projections have no PEFT-compatible LoRA layout here).
  void attach_lora(const LoraOptions& options, const std::shared_ptr<const LoraSwitch>& on,
                   const ModelConfig& config);

  RMSNorm input_layernorm{nullptr};
  QwenAttention self_attn{nullptr};     // Qwen
  MlaAttention mla_attn{nullptr};       // DeepSeek-V3 (registered as "self_attn")
  RMSNorm post_attention_layernorm{nullptr};
  QwenMLP mlp{nullptr};                // dense layers
  QwenSparseMoeBlock sparse_mlp{nullptr};  // sparse layers (registered as "mlp")

 private:
  torch::Tensor feed_forward(const torch::Tensor& x, MoeRoutingLog* log);
  torch::Tensor attention(const torch::Tensor& x, const RopeTable& rope,
                          const torch::Tensor& cu_seqlens);
};
TORCH_MODULE(QwenDecoderLayer);

}  // namespace aspen::model
