#include "aspen/train/model_copy.h"

#include <map>
#include <string>

#include "aspen/train/imports.h"

namespace aspen::train {

QwenForCausalLM copy_model(const QwenForCausalLM& source, torch::ScalarType dtype,
                           torch::Device device, bool trainable) {
  // Same TP, EP and PP contexts: the copy holds the same shards, experts and stage
  // (hf_state gives local shapes).
  QwenForCausalLM copy(source->config, source->tp, source->ep, source->pp);
  // The same adapters (model/lora.h), so the copy has the same parameter names.
  if (source->has_lora()) copy->attach_lora(source->lora_options);
  copy->to(device, dtype);
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, tensor] : source->hf_state()) weights[name] = tensor;
  {
    torch::NoGradGuard no_grad;
    copy->load_state(weights, "model copy");
  }
  for (auto& item : copy->named_parameters(/*recurse=*/true)) {
    // With LoRA only the adapters train: the base stays frozen in every copy.
    item.value().set_requires_grad(trainable && !is_frozen_parameter(item.key()) &&
                                   (!copy->has_lora() || is_lora_parameter(item.key())));
  }
  return copy;
}

QwenForCausalLM compute_copy(const QwenForCausalLM& master, const TrainerOptions& options) {
  options.validate();
  if (param_dtype(*master) == options.compute_dtype) return master;
  return copy_model(master, options.compute_dtype, param_device(*master),
                    /*trainable=*/true);
}

torch::Device param_device(const torch::nn::Module& module) {
  const auto params = module.parameters();
  TORCH_CHECK(!params.empty(), "module has no parameters");
  return params.front().device();
}

torch::ScalarType param_dtype(const torch::nn::Module& module) {
  const auto params = module.parameters();
  TORCH_CHECK(!params.empty(), "module has no parameters");
  const torch::ScalarType dtype = params.front().scalar_type();
  for (const auto& p : params) {
    TORCH_CHECK(p.scalar_type() == dtype, "module parameters mix dtypes");
  }
  return dtype;
}

}  // namespace aspen::train
