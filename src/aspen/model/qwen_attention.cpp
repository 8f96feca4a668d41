#include "aspen/model/qwen_attention.h"

#include <cmath>
#include <string>

#include "aspen/kernels/small_batch_linear.h"
#include "aspen/kernels/varlen_attention.h"
#include "aspen/model/imports.h"
#include "aspen/model/tp_layout.h"
#include "aspen/parallel/tp_collectives.h"
#include "aspen/util/error.h"

namespace aspen::model {
namespace {

torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

// The layout does not depend on the layer index, so layer 0's name stands for all.
ShardSpec attention_spec(const std::string& param, const ModelConfig& config) {
  return qwen_shard_spec("model.layers.0.self_attn." + param, config);
}

// This rank's extent of a dimension of `full` elements split as `spec`.
int64_t local_extent(const ShardSpec& spec, int64_t full, const TensorParallel& tp,
                     const std::string& what) {
  return shard_range(spec, full, tp.rank, tp.size, what).length;
}

}  // namespace

QwenAttentionImpl::QwenAttentionImpl(const ModelConfig& config, const TensorParallel& tp)
    : head_dim(config.head_dim), tp(tp), kv_spec(attention_spec("k_proj.weight", config)) {
  const int64_t hidden = config.hidden_size;
  const int64_t q_out = local_extent(attention_spec("q_proj.weight", config),
                                     config.num_attention_heads * head_dim, tp, "q_proj");
  const int64_t kv_out =
      local_extent(kv_spec, config.num_key_value_heads * head_dim, tp, "k_proj/v_proj");
  num_heads = q_out / head_dim;
  num_kv_heads = kv_out / head_dim;
  q_proj = register_module("q_proj", make_linear(hidden, q_out, config.attention_bias));
  k_proj = register_module("k_proj", make_linear(hidden, kv_out, config.attention_bias));
  v_proj = register_module("v_proj", make_linear(hidden, kv_out, config.attention_bias));
  o_proj = register_module(
      "o_proj", make_linear(q_out, hidden,
                            config.family != ModelFamily::kQwen2 && config.attention_bias));
  if (config.has_qk_norm()) {
    q_norm = register_module("q_norm", RMSNorm(head_dim, config.rms_norm_eps));
    k_norm = register_module("k_norm", RMSNorm(head_dim, config.rms_norm_eps));
  }
}

torch::Tensor QwenAttentionImpl::kv_projection(torch::nn::Linear& proj, const torch::Tensor& x) {
  if (!has_replicas(kv_spec, tp.size)) return proj->forward(x);
  const torch::Tensor& bias = proj->bias;
  return torch::nn::functional::linear(
      x, sum_replica_grads(proj->weight, kv_spec, tp),
      bias.defined() ? sum_replica_grads(bias, kv_spec, tp) : torch::Tensor());
}

torch::Tensor QwenAttentionImpl::output_projection(const torch::Tensor& heads) {
  // small_batch_linear is F::linear except at a decode step's few rows, no gradient.
  // Under TP a bias joins after the reduction, the adapter's partial output before it.
  const bool bias_after_reduction = tp.enabled() && o_proj->bias.defined();
  const torch::Tensor partial = o_lora.add(
      heads, small_batch_linear(heads, o_proj->weight,
                                bias_after_reduction ? torch::Tensor() : o_proj->bias));
  const torch::Tensor out = reduce_from_tp_region(partial, tp);
  return bias_after_reduction ? out + o_proj->bias : out;
}

torch::Tensor QwenAttentionImpl::head_norm(RMSNorm& norm, const torch::Tensor& x) {
  if (!tp.enabled()) return norm->forward(x);
  return rms_norm(x, sum_replica_grads(norm->weight, ShardSpec{}, tp), norm->eps);
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> QwenAttentionImpl::project_qkv(
    const torch::Tensor& x, const RopeTable& rope) {
  const int64_t tokens = x.size(0);
  torch::Tensor q, k, v;
  if (qkv_.usable_for_inference()) {
    const std::vector<torch::Tensor> parts = qkv_.split(qkv_.forward(x));
    q = parts[0], k = parts[1], v = parts[2];
  } else {
    q = q_proj(x), k = kv_projection(k_proj, x), v = kv_projection(v_proj, x);
  }
  q = q_lora.add(x, q), k = k_lora.add(x, k), v = v_lora.add(x, v);
  q = q.view({tokens, num_heads, head_dim});
  k = k.view({tokens, num_kv_heads, head_dim});
  v = v.view({tokens, num_kv_heads, head_dim});
  if (q_norm) {
    q = head_norm(q_norm, q);
    k = head_norm(k_norm, k);
  }
  return {apply_rope(q, rope), apply_rope(k, rope), v};
}

void QwenAttentionImpl::fuse_projections() { qkv_.fuse({q_proj, k_proj, v_proj}); }

void QwenAttentionImpl::attach_lora(const LoraOptions& options,
                                    const std::shared_ptr<const LoraSwitch>& on,
                                    const ModelConfig& config) {
  auto attach = [&](LoraBranch& branch, torch::nn::Linear& target, const std::string& leaf) {
    if (!options.targets_projection(leaf)) return;
    check_input(!branch.attached(), "already has a LoRA adapter", "self_attn." + leaf);
    const ShardSpec spec = attention_spec(leaf + ".weight", config);
    branch = LoraBranch(target, options, on, lora_a_spec(spec), lora_b_spec(spec), tp);
  };
  attach(q_lora, q_proj, "q_proj");
  attach(k_lora, k_proj, "k_proj");
  attach(v_lora, v_proj, "v_proj");
  attach(o_lora, o_proj, "o_proj");
}

torch::Tensor QwenAttentionImpl::forward(const torch::Tensor& x, const RopeTable& rope,
                                         const torch::Tensor& cu_seqlens) {
  auto [q, k, v] = project_qkv(copy_to_tp_region(x, tp), rope);
  torch::Tensor out = varlen_causal_attention(q, k, v, cu_seqlens, 1.0 / std::sqrt(head_dim));
  return output_projection(out.reshape({x.size(0), num_heads * head_dim}));
}

torch::Tensor QwenAttentionImpl::forward_paged(const torch::Tensor& x, const RopeTable& rope,
                                               const PagedBatch& batch, int64_t layer) {
  auto [q, k, v] = project_qkv(x, rope);
  torch::Tensor key_cache = batch.key_caches.at(layer);
  torch::Tensor value_cache = batch.value_caches.at(layer);
  write_kv_cache(k, v, key_cache, value_cache, batch.slot_mapping);
  torch::Tensor out =
      paged_attention(q.contiguous(), key_cache, value_cache, batch, 1.0 / std::sqrt(head_dim));
  // Row-parallel o_proj: this rank's heads give a partial sum of the output.
  return output_projection(out.reshape({x.size(0), num_heads * head_dim}));
}

}  // namespace aspen::model
