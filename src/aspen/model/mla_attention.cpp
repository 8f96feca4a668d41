#include "aspen/model/mla_attention.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "aspen/kernels/varlen_attention.h"
#include "aspen/model/imports.h"

namespace aspen::model {
namespace {

torch::nn::Linear make_mla_linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// transformers' DeepseekV3 hard-codes the default eps for the two low-rank norms.
constexpr double kLowRankNormEps = 1e-6;

// Zero columns appended to the last dimension up to `width` (a no-op when equal).
torch::Tensor pad_last(const torch::Tensor& x, int64_t width) {
  if (x.size(-1) == width) return x;
  return torch::constant_pad_nd(x, {0, width - x.size(-1)});
}

}  // namespace

MlaAttentionImpl::MlaAttentionImpl(const ModelConfig& config)
    : num_heads(config.num_attention_heads),
      mla(config.mla),
      scale(1.0 / std::sqrt(static_cast<double>(config.mla.qk_head_dim()))) {
  // YaRN sharpens DeepSeek's softmax by mscale(factor, mscale_all_dim)^2 (transformers'
  // yarn_apply_mscale).
  const RopeScaling& rope = config.rope_scaling;
  if (rope.yarn && rope.mscale_all_dim > 0) {
    const double mscale = yarn_mscale(rope.factor, rope.mscale_all_dim);
    scale *= mscale * mscale;
  }
  const int64_t hidden = config.hidden_size;
  const int64_t q_width = num_heads * mla.qk_head_dim();
  if (mla.q_lora_rank > 0) {
    q_a_proj = register_module("q_a_proj",
                               make_mla_linear(hidden, mla.q_lora_rank, config.attention_bias));
    q_a_layernorm = register_module("q_a_layernorm", RMSNorm(mla.q_lora_rank, kLowRankNormEps));
    q_b_proj = register_module("q_b_proj", make_mla_linear(mla.q_lora_rank, q_width, false));
  } else {
    q_proj = register_module("q_proj", make_mla_linear(hidden, q_width, false));
  }
  kv_a_proj_with_mqa = register_module(
      "kv_a_proj_with_mqa",
      make_mla_linear(hidden, mla.kv_lora_rank + mla.qk_rope_head_dim, config.attention_bias));
  kv_a_layernorm = register_module("kv_a_layernorm", RMSNorm(mla.kv_lora_rank, kLowRankNormEps));
  kv_b_proj = register_module(
      "kv_b_proj",
      make_mla_linear(mla.kv_lora_rank, num_heads * (mla.qk_nope_head_dim + mla.v_head_dim), false));
  o_proj = register_module(
      "o_proj", make_mla_linear(num_heads * mla.v_head_dim, hidden, config.attention_bias));
}

torch::Tensor MlaAttentionImpl::rotate(const torch::Tensor& x, const RopeTable& rope) const {
  if (!mla.rope_interleave) return apply_rope(x, rope);
  // Pairs (x0, x1), (x2, x3), ... -> halves [x0, x2, ... | x1, x3, ...]: rotate_half's
  // layout, in which transformers' interleaved rotation returns its result too.
  std::vector<int64_t> pairs = x.sizes().vec();
  pairs.back() /= 2;
  pairs.push_back(2);
  const torch::Tensor halves = x.reshape(pairs).transpose(-1, -2).reshape(x.sizes());
  return apply_rope(halves, rope);
}

torch::Tensor MlaAttentionImpl::query(const torch::Tensor& x, const RopeTable& rope) {
  const torch::Tensor flat = q_proj ? q_proj(x) : q_b_proj(q_a_layernorm(q_a_proj(x)));
  const torch::Tensor q = flat.view({x.size(0), num_heads, mla.qk_head_dim()});
  return torch::cat({q.narrow(-1, 0, mla.qk_nope_head_dim),
                     rotate(q.narrow(-1, mla.qk_nope_head_dim, mla.qk_rope_head_dim), rope)},
                    -1);
}

std::pair<torch::Tensor, torch::Tensor> MlaAttentionImpl::latent(const torch::Tensor& x,
                                                                 const RopeTable& rope) {
  const torch::Tensor compressed = kv_a_proj_with_mqa(x);
  const torch::Tensor c = kv_a_layernorm(compressed.narrow(-1, 0, mla.kv_lora_rank));
  const torch::Tensor k_rope =
      compressed.narrow(-1, mla.kv_lora_rank, mla.qk_rope_head_dim).unsqueeze(1);
  return {c, rotate(k_rope, rope)};
}

torch::Tensor MlaAttentionImpl::forward(const torch::Tensor& x, const RopeTable& rope,
                                        const torch::Tensor& cu_seqlens) {
  const int64_t tokens = x.size(0);
  const torch::Tensor q = query(x, rope);
  auto [c, k_rope] = latent(x, rope);
  const torch::Tensor kv =
      kv_b_proj(c).view({tokens, num_heads, mla.qk_nope_head_dim + mla.v_head_dim});
  const torch::Tensor k =
      torch::cat({kv.narrow(-1, 0, mla.qk_nope_head_dim),
                  k_rope.expand({tokens, num_heads, mla.qk_rope_head_dim})},
                 -1);
  const torch::Tensor v = kv.narrow(-1, mla.qk_nope_head_dim, mla.v_head_dim);
  // The attention kernel takes one head width: zero columns pad the narrower side
  // (they add nothing to a dot product, and padded value columns are cut off).
  const int64_t width = std::max(mla.qk_head_dim(), mla.v_head_dim);
  const torch::Tensor out = varlen_causal_attention(pad_last(q, width), pad_last(k, width),
                                                    pad_last(v, width), cu_seqlens, scale)
                                .narrow(-1, 0, mla.v_head_dim);
  return o_proj(out.reshape({tokens, num_heads * mla.v_head_dim}));
}

torch::Tensor MlaAttentionImpl::forward_paged(const torch::Tensor& x, const RopeTable& rope,
                                              const PagedBatch& batch, int64_t layer) {
  const int64_t tokens = x.size(0);
  const int64_t rank = mla.kv_lora_rank;
  const torch::Tensor q = query(x, rope);
  auto [c, k_rope] = latent(x, rope);
  torch::Tensor cache = batch.key_caches.at(layer);  // [N, S, 1, R + r]; values alias it
  const torch::Tensor row = torch::cat({c.unsqueeze(1), k_rope}, -1).to(cache.scalar_type());
  write_kv_cache(row, row, cache, cache, batch.slot_mapping);

  // Absorb the key up-projection into the query: q_lat[t, h] = W_UK[h]^T q_n[t, h].
  const torch::Tensor w = kv_b_proj->weight.view({num_heads, mla.qk_nope_head_dim + mla.v_head_dim, rank});
  const torch::Tensor w_uk = w.narrow(1, 0, mla.qk_nope_head_dim);            // [H, n, R]
  const torch::Tensor w_uv = w.narrow(1, mla.qk_nope_head_dim, mla.v_head_dim);  // [H, v, R]
  const torch::Tensor q_latent =
      torch::einsum("thn,hnr->thr", {q.narrow(-1, 0, mla.qk_nope_head_dim), w_uk});
  const torch::Tensor q_full =
      torch::cat({q_latent, q.narrow(-1, mla.qk_nope_head_dim, mla.qk_rope_head_dim)}, -1)
          .to(cache.scalar_type())
          .contiguous();
  const torch::Tensor attended = paged_attention(q_full, cache, cache, batch, scale);
  const torch::Tensor out =
      torch::einsum("thr,hvr->thv", {attended.narrow(-1, 0, rank).to(w.scalar_type()), w_uv});
  return o_proj(out.reshape({tokens, num_heads * mla.v_head_dim}));
}

}  // namespace aspen::model
