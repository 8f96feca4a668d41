#include "aspen/model/weights_init.h"

#include <ATen/CPUGeneratorImpl.h>

#include "aspen/model/imports.h"
#include "aspen/model/tp_layout.h"
#include "aspen/util/error.h"
#include "aspen/util/strings.h"

namespace aspen::model {
namespace {

// Initialises one parameter (HF name `name`) from `generator`, as HF's _init_weights.
void init_parameter(const std::string& name, torch::Tensor param, const ModelConfig& config,
                    const TensorParallel& tp, at::Generator& generator,
                    double initializer_range) {
  if (ends_with(name, "norm.weight")) {  // input/post_attention_layernorm, q/k_norm, norm
    param.fill_(1.0);
  } else if (ends_with(name, ".bias") || is_frozen_parameter(name)) {
    // Biases start at zero, and so does DeepSeek's router bias (as in transformers).
    param.zero_();
  } else {
    const ShardSpec spec = qwen_shard_spec(name, config);
    torch::Tensor values =
        torch::empty(full_shape(spec, param.sizes(), tp.size, name), torch::kFloat);
    values.normal_(0.0, initializer_range, generator);
    param.copy_(take_shard(values, spec, tp.rank, tp.size, name));
  }
}

// A pipeline stage: walks the whole model in HF order, initialising what this stage
// holds and drawing into stand-ins what it does not (norms draw nothing; lm_head comes
// last, so the generator's later state matters to no one).
void init_stage_weights(QwenForCausalLM& model, at::Generator& generator,
                        double initializer_range) {
  const ModelConfig& config = model->config;
  QwenModelImpl& inner = *model->model;
  auto init = [&](const std::string& name, const torch::Tensor& param) {
    init_parameter(name, param, config, model->tp, generator, initializer_range);
  };
  torch::Tensor embed = inner.embed_tokens
                            ? inner.embed_tokens->weight
                            : torch::empty({config.vocab_size, config.hidden_size});
  init("model.embed_tokens.weight", embed);
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    std::shared_ptr<torch::nn::Module> layer =
        inner.layer_range.contains(i)
            ? inner.layers->ptr(static_cast<size_t>(i))
            : QwenDecoderLayer(config, model->tp, i, model->ep).ptr();
    for (const auto& item : layer->named_parameters(/*recurse=*/true)) {
      init("model.layers." + std::to_string(i) + "." + item.key(), item.value());
    }
  }
  if (inner.norm) init("model.norm.weight", inner.norm->weight);
  if (model->lm_head) init("lm_head.weight", model->lm_head->weight);
}

}  // namespace

void init_weights(QwenForCausalLM& model, uint64_t seed, double initializer_range) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  torch::NoGradGuard no_grad;
  if (model->pp.enabled()) {
    check_input(!model->has_lora(), "initialise a pipeline stage before attaching adapters",
                "init_weights");
    init_stage_weights(model, generator, initializer_range);
    return;
  }
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    init_parameter(item.key(), item.value(), model->config, model->tp, generator,
                   initializer_range);
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
