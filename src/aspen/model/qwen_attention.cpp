#include "aspen/model/qwen_attention.h"

#include <cmath>

#include "aspen/kernels/varlen_attention.h"

namespace aspen {
namespace {

torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

}  // namespace

QwenAttentionImpl::QwenAttentionImpl(const ModelConfig& config)
    : num_heads(config.num_attention_heads),
      num_kv_heads(config.num_key_value_heads),
      head_dim(config.head_dim) {
  const int64_t hidden = config.hidden_size;
  q_proj =
      register_module("q_proj", make_linear(hidden, num_heads * head_dim, config.attention_bias));
  k_proj = register_module("k_proj",
                           make_linear(hidden, num_kv_heads * head_dim, config.attention_bias));
  v_proj = register_module("v_proj",
                           make_linear(hidden, num_kv_heads * head_dim, config.attention_bias));
  o_proj = register_module("o_proj", make_linear(num_heads * head_dim, hidden, false));
  if (config.has_qk_norm()) {
    q_norm = register_module("q_norm", RMSNorm(head_dim, config.rms_norm_eps));
    k_norm = register_module("k_norm", RMSNorm(head_dim, config.rms_norm_eps));
  }
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> QwenAttentionImpl::project_qkv(
    const torch::Tensor& x, const RopeTable& rope) {
  const int64_t tokens = x.size(0);
  torch::Tensor q = q_proj(x).view({tokens, num_heads, head_dim});
  torch::Tensor k = k_proj(x).view({tokens, num_kv_heads, head_dim});
  torch::Tensor v = v_proj(x).view({tokens, num_kv_heads, head_dim});
  if (q_norm) {
    q = q_norm(q);
    k = k_norm(k);
  }
  return {apply_rope(q, rope), apply_rope(k, rope), v};
}

torch::Tensor QwenAttentionImpl::forward(const torch::Tensor& x, const RopeTable& rope,
                                         const torch::Tensor& cu_seqlens) {
  auto [q, k, v] = project_qkv(x, rope);
  torch::Tensor out = varlen_causal_attention(q, k, v, cu_seqlens, 1.0 / std::sqrt(head_dim));
  return o_proj(out.reshape({x.size(0), num_heads * head_dim}));
}

torch::Tensor QwenAttentionImpl::forward_paged(const torch::Tensor& x, const RopeTable& rope,
                                               const PagedBatch& batch, int64_t layer) {
  auto [q, k, v] = project_qkv(x, rope);
  torch::Tensor key_cache = batch.key_caches.at(layer);
  torch::Tensor value_cache = batch.value_caches.at(layer);
  write_kv_cache(k, v, key_cache, value_cache, batch.slot_mapping);
  torch::Tensor out =
      paged_attention(q.contiguous(), key_cache, value_cache, batch.block_tables, batch.query_start,
                      batch.context_lens, 1.0 / std::sqrt(head_dim));
  return o_proj(out.reshape({x.size(0), num_heads * head_dim}));
}

}  // namespace aspen
