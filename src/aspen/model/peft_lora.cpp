#include "aspen/model/peft_lora.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "aspen/model/imports.h"
#include "aspen/util/error.h"

namespace aspen::model {
namespace {

std::string config_file(const std::string& source) {
  return (std::filesystem::path(source) / kPeftConfigFile).string();
}

std::string known_targets() {
  std::string listed;
  for (const std::string& name : lora_target_names()) {
    listed += std::string(listed.empty() ? "" : ", ") + name;
  }
  return listed;
}

}  // namespace

LoraOptions lora_options_of(const LoraAdapter& adapter, const std::string& source) {
  const LoraAdapterConfig& config = adapter.config;
  LoraOptions options;
  options.rank = config.rank;
  options.alpha = config.alpha;
  options.dropout = config.dropout;
  options.use_rslora = config.use_rslora;
  options.targets.clear();
  const std::vector<std::string>& known = lora_target_names();
  for (const std::string& entry : config.target_modules) {
    const size_t dot = entry.rfind('.');
    const std::string leaf = dot == std::string::npos ? entry : entry.substr(dot + 1);
    check_input(std::find(known.begin(), known.end(), leaf) != known.end(),
                "target_modules entry '" + entry + "' is not a projection Aspen can adapt (" +
                    known_targets() + ")",
                config_file(source));
    if (std::find(options.targets.begin(), options.targets.end(), leaf) == options.targets.end()) {
      options.targets.push_back(leaf);
    }
  }
  for (const auto& [name, tensor] : adapter.tensors) {
    if (name.find(".mlp.experts.") != std::string::npos) options.experts = true;
  }
  options.validate(config_file(source));
  return options;
}

void apply_peft_adapter(QwenForCausalLM& model, const LoraAdapter& adapter,
                        const std::string& source) {
  check_input(!model->has_lora(), "the model already has LoRA adapters", source);
  const LoraOptions options = lora_options_of(adapter, source);
  try {
    model->attach_lora(options);
  } catch (const Error& error) {
    // attach_lora names the option (train.lora.*); here the input is the adapter.
    throw Error(error.problem() + " (" + error.input() + ")", config_file(source), error.hint());
  }
  torch::NoGradGuard no_grad;
  try {
    model->load_lora_state(adapter.tensors, source);
  } catch (const Error& error) {
    // load_lora_state's hint speaks of checkpoints and config.json; this is an adapter.
    throw Error(error.problem(), error.input(),
                "the adapter does not fit this model: trained for another base model, or "
                "adapting only some of its layers");
  }
}

LoraAdapter peft_adapter_of(const QwenForCausalLMImpl& model, const std::string& base_model) {
  check_input(model.has_lora(), "the model has no LoRA adapters", "PEFT adapter export");
  const LoraOptions& options = model.lora_options;
  LoraAdapter adapter;
  adapter.config.rank = options.rank;
  adapter.config.alpha = options.alpha;
  adapter.config.dropout = options.dropout;
  adapter.config.use_rslora = options.use_rslora;
  adapter.config.target_modules = options.targets;
  adapter.config.base_model = base_model;
  for (const auto& [name, tensor] : model.lora_state()) {
    adapter.tensors[name] = tensor.detach().to(torch::kCPU).clone();
  }
  return adapter;
}

}  // namespace aspen::model
