// Multi-head latent attention (MLA) of a DeepSeek-V3 decoder layer: transformers'
// DeepseekV3Attention, over a packed batch and over the paged KV cache.
//
// Shapes: T = tokens, C = hidden_size, H = num_attention_heads, n = qk_nope_head_dim,
// r = qk_rope_head_dim, v = v_head_dim, R = kv_lora_rank, Q = q_lora_rank.
//   q   = q_b_proj(q_a_layernorm(q_a_proj(x)))  [T, H, n + r]   (q_proj(x) when Q = 0)
//   [c, k_r] = kv_a_proj_with_mqa(x)            c [T, R], k_r [T, r] (one rope key for all heads)
//   c   = kv_a_layernorm(c)
//   [k_n, val] = kv_b_proj(c)                    [T, H, n] and [T, H, v]
//   q_r, k_r rotated by RoPE (de-interleaved first when config.mla.rope_interleave, which
//   is exactly transformers' interleaved rotation)
//   attention(q = [q_n, q_r], k = [k_n, k_r], val), scale (n + r)^-1/2 (times
//   mscale(factor, mscale_all_dim)^2 under YaRN rope scaling), then o_proj.
// The two low-rank norms use eps 1e-6 whatever rms_norm_eps says, as transformers does.
//
// Paged (rollout): the cache stores per token only [c, k_r] (R + r values, one "kv head"),
// not H full keys and values - the point of MLA. Attention runs in the absorbed form:
//   q_lat[h] = W_UK[h]^T q_n[h]   (W_UK[h] = kv_b_proj rows of head h's keys, [n, R])
//   score    = q_lat . c + q_r . k_r     (one [R + r] dot product per cached token)
//   out[h]   = W_UV[h] (sum_t p_t c_t)   (W_UV[h]: head h's value rows, [v, R])
// which equals the full form exactly in real arithmetic. The latent rows serve as keys
// AND values (the value cache is the key cache: attention over [c, k_r] then keeps the
// first R output columns).
//
// Parameters (HF names under "self_attn."): q_proj.weight [H(n+r), C] or
// q_a_proj.weight [Q, C], q_a_layernorm.weight [Q], q_b_proj.weight [H(n+r), Q];
// kv_a_proj_with_mqa.weight [R + r, C], kv_a_layernorm.weight [R],
// kv_b_proj.weight [H(n+v), R], o_proj.weight [C, Hv]; with attention_bias, q_a_proj,
// kv_a_proj_with_mqa and o_proj carry biases.
// No tensor parallelism (validate_tp_size refuses it for MLA).
// Thread safety: forward mutates nothing; forward_paged writes the step's cache slots.
#pragma once

#include <torch/torch.h>

#include "aspen/io/hf_config.h"
#include "aspen/kernels/paged_attention.h"
#include "aspen/kernels/rope.h"
#include "aspen/model/imports.h"
#include "aspen/model/rms_norm_layer.h"

namespace aspen::model {

struct MlaAttentionImpl : torch::nn::Module {
  explicit MlaAttentionImpl(const ModelConfig& config);

  // x [T, C] -> [T, C]; causal within each sequence of cu_seqlens.
  torch::Tensor forward(const torch::Tensor& x, const RopeTable& rope,
                        const torch::Tensor& cu_seqlens);
  // Rollout step: the new tokens' [c, k_r] go into layer `layer` of the latent cache
  // ([N, S, 1, R + r]), then each attends to its sequence's history (absorbed form).
  torch::Tensor forward_paged(const torch::Tensor& x, const RopeTable& rope,
                              const PagedBatch& batch, int64_t layer);

  int64_t num_heads;
  MlaConfig mla;
  double scale;
  torch::nn::Linear q_proj{nullptr};    // q_lora_rank = 0
  torch::nn::Linear q_a_proj{nullptr};  // q_lora_rank > 0
  RMSNorm q_a_layernorm{nullptr};
  torch::nn::Linear q_b_proj{nullptr};
  torch::nn::Linear kv_a_proj_with_mqa{nullptr};
  RMSNorm kv_a_layernorm{nullptr};
  torch::nn::Linear kv_b_proj{nullptr};
  torch::nn::Linear o_proj{nullptr};

 private:
  // q [T, H, n + r] with its rope part rotated.
  torch::Tensor query(const torch::Tensor& x, const RopeTable& rope);
  // The normalised latent c [T, R] and the rotated rope key [T, 1, r].
  std::pair<torch::Tensor, torch::Tensor> latent(const torch::Tensor& x, const RopeTable& rope);
  // The rope part's layout for apply_rope (de-interleaved when the checkpoint interleaves).
  torch::Tensor rotate(const torch::Tensor& x, const RopeTable& rope) const;
};
TORCH_MODULE(MlaAttention);

}  // namespace aspen::model
