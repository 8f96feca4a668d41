#include "aspen/model/qwen_decoder_layer.h"

#include "aspen/model/imports.h"
#include "aspen/util/error.h"

namespace aspen::model {

QwenDecoderLayerImpl::QwenDecoderLayerImpl(const ModelConfig& config, const TensorParallel& tp,
                                           int64_t index, const ExpertParallel& ep) {
  input_layernorm =
      register_module("input_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps));
  if (config.is_mla()) {
    mla_attn = register_module("self_attn", MlaAttention(config));
  } else {
    self_attn = register_module("self_attn", QwenAttention(config, tp));
  }
  post_attention_layernorm =
      register_module("post_attention_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps));
  if (config.is_sparse_layer(index)) {
    sparse_mlp = register_module("mlp", QwenSparseMoeBlock(config, tp, ep));
  } else {
    mlp = register_module("mlp", QwenMLP(config, tp));
  }
}

void QwenDecoderLayerImpl::fuse_projections() {
  if (self_attn) self_attn->fuse_projections();
  if (mlp) mlp->fuse_projections();
}

void QwenDecoderLayerImpl::attach_lora(const LoraOptions& options,
                                       const std::shared_ptr<const LoraSwitch>& on,
                                       const ModelConfig& config) {
  if (self_attn) {
    self_attn->attach_lora(options, on, config);
  } else {
    for (const char* leaf : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      check_input(!options.targets_projection(leaf),
                  std::string("targets ") + leaf +
                      ", but multi-head latent attention (deepseek_v3) has no LoRA layout; "
                      "target the MLP projections only",
                  "LoRA targets");
    }
  }
  if (mlp) mlp->attach_lora(options, on, config, "model.layers.0.mlp.gate_proj.weight");
  if (sparse_mlp) sparse_mlp->attach_lora(options, on, config);
}

torch::Tensor QwenDecoderLayerImpl::feed_forward(const torch::Tensor& x, MoeRoutingLog* log) {
  return sparse_mlp ? sparse_mlp->forward(x, log) : mlp(x);
}

torch::Tensor QwenDecoderLayerImpl::attention(const torch::Tensor& x, const RopeTable& rope,
                                              const torch::Tensor& cu_seqlens) {
  return mla_attn ? mla_attn->forward(x, rope, cu_seqlens) : self_attn(x, rope, cu_seqlens);
}

torch::Tensor QwenDecoderLayerImpl::forward(const torch::Tensor& x, const RopeTable& rope,
                                            const torch::Tensor& cu_seqlens, MoeRoutingLog* log) {
  torch::Tensor h = x + attention(input_layernorm(x), rope, cu_seqlens);
  return h + feed_forward(post_attention_layernorm(h), log);
}

torch::Tensor QwenDecoderLayerImpl::forward_paged(const torch::Tensor& x, const RopeTable& rope,
                                                  const PagedBatch& batch, int64_t layer,
                                                  MoeRoutingLog* log) {
  const torch::Tensor normed = input_layernorm(x);
  torch::Tensor h = x + (mla_attn ? mla_attn->forward_paged(normed, rope, batch, layer)
                                  : self_attn->forward_paged(normed, rope, batch, layer));
  return h + feed_forward(post_attention_layernorm(h), log);
}

}  // namespace aspen::model
