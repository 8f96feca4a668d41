#include "aspen/model/weights_init.h"

#include <ATen/CPUGeneratorImpl.h>

#include "aspen/model/imports.h"
#include "aspen/model/tp_layout.h"
#include "aspen/util/strings.h"

namespace aspen::model {
void init_weights(QwenForCausalLM& model, uint64_t seed, double initializer_range) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  torch::NoGradGuard no_grad;
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor param = item.value();
    if (ends_with(name, "norm.weight")) {  // input/post_attention_layernorm, q/k_norm, norm
      param.fill_(1.0);
    } else if (ends_with(name, ".bias") || is_frozen_parameter(name)) {
      // Biases start at zero, and so does DeepSeek's router bias (as in transformers).
      param.zero_();
    } else {
      const TensorParallel& tp = model->tp;
      const ShardSpec spec = qwen_shard_spec(name, model->config);
      torch::Tensor values =
          torch::empty(full_shape(spec, param.sizes(), tp.size, name), torch::kFloat);
      values.normal_(0.0, initializer_range, generator);
      param.copy_(take_shard(values, spec, tp.rank, tp.size, name));
    }
  }
}

QwenForCausalLM make_random_model(const ModelConfig& config, uint64_t seed, torch::ScalarType dtype,
                                  torch::Device device, const TensorParallel& tp) {
  QwenForCausalLM model(config, tp);
  init_weights(model, seed);
  model->to(device, dtype);
  return model;
}

}  // namespace aspen::model
