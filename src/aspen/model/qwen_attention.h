// Self-attention block of a Qwen2/Qwen3 decoder layer over a packed batch.
//
// Shapes: T = packed tokens, C = hidden_size, H = num_attention_heads,
// K = num_key_value_heads, D = head_dim (explicit: Qwen3 allows H*D != C).
// Parameters (HF names under "self_attn."):
//   q_proj.weight [H*D, C]  k_proj.weight [K*D, C]  v_proj.weight [K*D, C]
//   q_proj/k_proj/v_proj.bias [H*D]/[K*D]/[K*D]   when config.attention_bias
//   o_proj.weight [C, H*D] (no bias)
//   q_norm.weight [D], k_norm.weight [D]          Qwen3 only: RMSNorm per head
//                                                 applied before RoPE
// forward: x [T, C] -> [T, C]; causal within each sequence of cu_seqlens.
// Thread safety: forward mutates nothing; concurrent calls are safe.
#pragma once

#include <torch/torch.h>

#include "aspen/io/hf_config.h"
#include "aspen/kernels/paged_attention.h"
#include "aspen/kernels/rope.h"
#include "aspen/model/rms_norm_layer.h"

namespace aspen {

struct QwenAttentionImpl : torch::nn::Module {
  explicit QwenAttentionImpl(const ModelConfig& config);

  torch::Tensor forward(const torch::Tensor& x, const RopeTable& rope,
                        const torch::Tensor& cu_seqlens);
  // Rollout path: x [T, C] holds the new tokens of a step; their k/v are written
  // into layer `layer` of the paged cache, then each attends to its sequence's
  // cached history (kernels/paged_attention.h). Inference only.
  torch::Tensor forward_paged(const torch::Tensor& x, const RopeTable& rope,
                              const PagedBatch& batch, int64_t layer);

  // q [T, H, D], k and v [T, K, D] after projection, q/k norm and RoPE.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> project_qkv(const torch::Tensor& x,
                                                                      const RopeTable& rope);

  int64_t num_heads;
  int64_t num_kv_heads;
  int64_t head_dim;
  torch::nn::Linear q_proj{nullptr};
  torch::nn::Linear k_proj{nullptr};
  torch::nn::Linear v_proj{nullptr};
  torch::nn::Linear o_proj{nullptr};
  RMSNorm q_norm{nullptr};  // null for Qwen2
  RMSNorm k_norm{nullptr};
};
TORCH_MODULE(QwenAttention);

}  // namespace aspen
