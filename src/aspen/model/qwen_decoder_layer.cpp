#include "aspen/model/qwen_decoder_layer.h"

namespace aspen {

QwenDecoderLayerImpl::QwenDecoderLayerImpl(const ModelConfig& config, const TensorParallel& tp) {
  input_layernorm =
      register_module("input_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps));
  self_attn = register_module("self_attn", QwenAttention(config, tp));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RMSNorm(config.hidden_size, config.rms_norm_eps));
  mlp = register_module("mlp", QwenMLP(config, tp));
}

torch::Tensor QwenDecoderLayerImpl::forward(const torch::Tensor& x, const RopeTable& rope,
                                            const torch::Tensor& cu_seqlens) {
  torch::Tensor h = x + self_attn(input_layernorm(x), rope, cu_seqlens);
  return h + mlp(post_attention_layernorm(h));
}

torch::Tensor QwenDecoderLayerImpl::forward_paged(const torch::Tensor& x, const RopeTable& rope,
                                                  const PagedBatch& batch, int64_t layer) {
  torch::Tensor h = x + self_attn->forward_paged(input_layernorm(x), rope, batch, layer);
  return h + mlp(post_attention_layernorm(h));
}

}  // namespace aspen
