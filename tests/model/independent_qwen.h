// A second Qwen2/Qwen3 forward for tests, written from the formulas with plain
// libtorch ops and no Aspen model/kernels code: its own RMSNorm, RoPE with
// rotate_half, GQA attention with an explicit causal mask built per sequence,
// SwiGLU, and for Qwen3-MoE sparse layers the router and experts token by token
// (softmax, top-k, optional renormalisation, weighted sum of the chosen experts).
// It reads parameters by HF name, so it checks the module's naming too.
//
// Shapes: T = packed tokens, C = hidden, V = vocab. Works in the parameters' dtype.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "aspen/io/hf_config.h"

namespace aspen::testing {

using namespace aspen::model;

using Weights = std::map<std::string, torch::Tensor>;

inline torch::Tensor ref_rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  return x / torch::sqrt(x.pow(2).mean(-1, true) + eps) * w;
}

inline torch::Tensor ref_linear(const Weights& w, const std::string& name, const torch::Tensor& x) {
  torch::Tensor y = torch::matmul(x, w.at(name + ".weight").t());
  auto bias = w.find(name + ".bias");
  return bias == w.end() ? y : y + bias->second;
}

// x [L, heads, D], positions 0..L-1. Angles in fp32 as HF computes them (its
// inv_freq and position product are fp32), so fp64 runs compare at fp64 precision.
inline torch::Tensor ref_rope(const torch::Tensor& x, double theta) {
  const int64_t len = x.size(0), dim = x.size(2);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat);
  torch::Tensor inv_freq =
      1.0 / torch::pow(torch::scalar_tensor(theta, f32),
                       torch::arange(0, dim, 2, f32) / static_cast<double>(dim));
  torch::Tensor angles = torch::arange(len, f32).unsqueeze(1) * inv_freq;
  torch::Tensor cos = torch::cat({angles.cos(), angles.cos()}, -1).unsqueeze(1).to(x.dtype());
  torch::Tensor sin = torch::cat({angles.sin(), angles.sin()}, -1).unsqueeze(1).to(x.dtype());
  torch::Tensor rotated = torch::cat({-x.slice(2, dim / 2), x.slice(2, 0, dim / 2)}, 2);
  return x * cos + rotated * sin;
}

inline torch::Tensor ref_swiglu_mlp(const Weights& w, const std::string& p, const torch::Tensor& m) {
  torch::Tensor gate = ref_linear(w, p + "gate_proj", m);
  return ref_linear(w, p + "down_proj", gate * torch::sigmoid(gate) * ref_linear(w, p + "up_proj", m));
}

// A sparse MoE block, one token at a time: m [L, C] -> [L, C].
inline torch::Tensor ref_moe(const ModelConfig& c, const Weights& w, const std::string& p,
                             const torch::Tensor& m) {
  std::vector<torch::Tensor> rows;
  for (int64_t t = 0; t < m.size(0); ++t) {
    torch::Tensor x = m.slice(0, t, t + 1);
    torch::Tensor probs = torch::softmax(ref_linear(w, p + "mlp.gate", x).squeeze(0), -1);
    auto [top, experts] = probs.topk(c.moe.num_experts_per_tok);
    if (c.moe.norm_topk_prob) top = top / top.sum();
    torch::Tensor out = torch::zeros_like(x);
    for (int64_t j = 0; j < c.moe.num_experts_per_tok; ++j) {
      const std::string e = p + "mlp.experts." + std::to_string(experts[j].item<int64_t>()) + ".";
      out = out + top[j] * ref_swiglu_mlp(w, e, x);
    }
    rows.push_back(out);
  }
  return torch::cat(rows, 0);
}

// One sequence [L] -> hidden [L, C] after the final norm.
inline torch::Tensor ref_sequence_hidden(const ModelConfig& c, const Weights& w,
                                         const torch::Tensor& ids) {
  const int64_t len = ids.size(0), h = c.num_attention_heads, kv = c.num_key_value_heads,
                d = c.head_dim;
  const double eps = c.rms_norm_eps;
  torch::Tensor x = w.at("model.embed_tokens.weight").index_select(0, ids);
  torch::Tensor future = torch::ones({len, len}, torch::kBool).triu(1);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    torch::Tensor a = ref_rms_norm(x, w.at(p + "input_layernorm.weight"), eps);
    torch::Tensor q = ref_linear(w, p + "self_attn.q_proj", a).view({len, h, d});
    torch::Tensor k = ref_linear(w, p + "self_attn.k_proj", a).view({len, kv, d});
    torch::Tensor v = ref_linear(w, p + "self_attn.v_proj", a).view({len, kv, d});
    if (c.family != ModelFamily::kQwen2) {
      q = ref_rms_norm(q, w.at(p + "self_attn.q_norm.weight"), eps);
      k = ref_rms_norm(k, w.at(p + "self_attn.k_norm.weight"), eps);
    }
    q = ref_rope(q, c.rope_theta);
    k = ref_rope(k, c.rope_theta);
    std::vector<torch::Tensor> heads;
    for (int64_t head = 0; head < h; ++head) {
      const int64_t kv_head = head / (h / kv);  // HF repeat_kv order
      torch::Tensor qh = q.select(1, head), kh = k.select(1, kv_head), vh = v.select(1, kv_head);
      torch::Tensor scores = torch::matmul(qh, kh.t()) / std::sqrt(static_cast<double>(d));
      scores = scores.masked_fill(future, -INFINITY);
      heads.push_back(torch::matmul(torch::softmax(scores, -1), vh));
    }
    x = x + ref_linear(w, p + "self_attn.o_proj", torch::cat(heads, 1));
    torch::Tensor m = ref_rms_norm(x, w.at(p + "post_attention_layernorm.weight"), eps);
    x = x + (c.is_sparse_layer(i) ? ref_moe(c, w, p, m) : ref_swiglu_mlp(w, p + "mlp.", m));
  }
  return ref_rms_norm(x, w.at("model.norm.weight"), eps);
}

inline torch::Tensor ref_head(const ModelConfig& c, const Weights& w) {
  return c.tie_word_embeddings ? w.at("model.embed_tokens.weight") : w.at("lm_head.weight");
}

}  // namespace aspen::testing
