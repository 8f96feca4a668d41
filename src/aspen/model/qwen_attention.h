// Self-attention block of a Qwen2/Qwen3 decoder layer over a packed batch.
//
// Shapes: T = packed tokens, C = hidden_size, H = num_attention_heads,
// K = num_key_value_heads, D = head_dim (explicit: Qwen3 allows H*D != C).
// Parameters (HF names under "self_attn."):
//   q_proj.weight [H*D, C]  k_proj.weight [K*D, C]  v_proj.weight [K*D, C]
//   q_proj/k_proj/v_proj.bias [H*D]/[K*D]/[K*D]   when config.attention_bias
//   o_proj.weight [C, H*D]
//   o_proj.bias [C]                               Qwen3 with attention_bias only (as
//                                                 in transformers; Qwen2 never has it)
//   q_norm.weight [D], k_norm.weight [D]          Qwen3 only: RMSNorm per head
//                                                 applied before RoPE
// forward: x [T, C] -> [T, C]; causal within each sequence of cu_seqlens.
//
// Tensor parallelism (tp.size = t > 1; layout: model/tp_layout.h): this rank holds
// H/t query heads and their kv heads - K/t of them, or the ONE kv head its query
// heads use when K < t (that head is replicated on t/K ranks). q/k/v are
// column-parallel (input through copy_to_tp_region), o_proj row-parallel (output
// through reduce_from_tp_region): one all-reduce per direction. The parameters
// above then have their local shapes (H*D -> H/t*D, K*D -> local kv heads * D).
// Gradients of replicated copies - q_norm/k_norm always, k/v projections when
// K < t - are summed over their holders (tp_collectives.h: sum_replica_grads), so
// each rank's gradient equals its shard of the single-process gradient.
// LoRA (attach_lora, model/lora.h): each targeted projection adds its adapter's
// output to its own, on every path (fused or not, paged or not).
// forward_paged does not support t > 1 (the caller, QwenModel, refuses it).
// Thread safety: forward mutates nothing; concurrent calls are safe (with t > 1,
// the collective ordering rule of tp_collectives.h applies).
#pragma once

#include <torch/torch.h>

#include "aspen/io/hf_config.h"
#include "aspen/kernels/paged_attention.h"
#include "aspen/kernels/rope.h"
#include "aspen/model/fused_projection.h"
#include "aspen/model/imports.h"
#include "aspen/model/lora.h"
#include "aspen/model/rms_norm_layer.h"
#include "aspen/parallel/shard_spec.h"
#include "aspen/parallel/tensor_parallel.h"

namespace aspen::model {

struct QwenAttentionImpl : torch::nn::Module {
  explicit QwenAttentionImpl(const ModelConfig& config, const TensorParallel& tp = {});

  torch::Tensor forward(const torch::Tensor& x, const RopeTable& rope,
                        const torch::Tensor& cu_seqlens);
  // Rollout path: x [T, C] holds the new tokens of a step; their k/v are written
  // into layer `layer` of the paged cache, then each attends to its sequence's
  // cached history (kernels/paged_attention.h). Inference only.
  torch::Tensor forward_paged(const torch::Tensor& x, const RopeTable& rope,
                              const PagedBatch& batch, int64_t layer);

  // q [T, H, D], k and v [T, K, D] after projection, q/k norm and RoPE (local heads
  // under TP; x must already be in the TP region). With the projections fused and no
  // gradient wanted, one GEMM computes all three (model/fused_projection.h).
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> project_qkv(const torch::Tensor& x,
                                                                      const RopeTable& rope);

  // Lays q_proj/k_proj/v_proj out in one weight matrix for inference; see
  // FusedProjection for what keeps and what breaks the layout. Idempotent.
  void fuse_projections();

  // Registers LoRA adapters inside the projections `options` targets (model/lora.h);
  // once, before training or loading an adapter. `config` gives the TP layouts.
  void attach_lora(const LoraOptions& options, const std::shared_ptr<const LoraSwitch>& on,
                   const ModelConfig& config);

  int64_t num_heads;     // query heads on this rank (H / t)
  int64_t num_kv_heads;  // kv heads on this rank (K / t, or 1 replicated when K < t)
  int64_t head_dim;
  TensorParallel tp;
  ShardSpec kv_spec;  // layout of k_proj/v_proj: decides whether they are replicated
  torch::nn::Linear q_proj{nullptr};
  torch::nn::Linear k_proj{nullptr};
  torch::nn::Linear v_proj{nullptr};
  torch::nn::Linear o_proj{nullptr};
  RMSNorm q_norm{nullptr};  // null for Qwen2
  RMSNorm k_norm{nullptr};
  // The projections' adapters (model/lora.h); empty (the identity) without LoRA.
  LoraBranch q_lora, k_lora, v_lora, o_lora;

 private:
  FusedProjection qkv_;
  // k_proj/v_proj(x), summing weight/bias gradients over replicas when K < t.
  torch::Tensor kv_projection(torch::nn::Linear& proj, const torch::Tensor& x);
  // o_proj over this rank's heads, reduced over TP ranks; a bias is added once, after
  // the reduction (Megatron's row-parallel linear).
  torch::Tensor output_projection(const torch::Tensor& heads);
  // q_norm/k_norm over this rank's heads; their weight gradient is summed over ranks.
  torch::Tensor head_norm(RMSNorm& norm, const torch::Tensor& x);
};
TORCH_MODULE(QwenAttention);

}  // namespace aspen::model
