// Tiny PEFT LoRA adapter directories for the model of tiny_model_dir.h, written by
// Aspen (io/peft_adapter.h; its PEFT parity is tests/io's), and the oracle the --lora
// commands are checked against: the same model with the adapter merged into its
// weights, W + scaling * B A, computed here from the adapter's own tensors.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "aspen/io/peft_adapter.h"
#include "aspen/model/pretrained.h"
#include "aspen/model/weights_init.h"
#include "model/tiny_configs.h"
#include "tiny_model_dir.h"

namespace aspen::testing {

// A random adapter for a model of `config` adapting `targets` (B non-zero, unlike a
// fresh adapter's, so that it changes the outputs), written into `dir`.
inline io::LoraAdapter write_tiny_adapter_dir(const std::string& dir, const ModelConfig& config,
                                              std::vector<std::string> targets, uint64_t seed,
                                              bool use_rslora = false) {
  model::LoraOptions options;
  options.rank = 4;
  options.alpha = 8;
  options.use_rslora = use_rslora;
  options.targets = targets;
  model::QwenForCausalLM model(config);
  model->attach_lora(options);
  torch::manual_seed(seed);
  io::LoraAdapter adapter;
  adapter.config.rank = options.rank;
  adapter.config.alpha = options.alpha;
  adapter.config.use_rslora = use_rslora;
  adapter.config.target_modules = targets;
  for (const auto& [name, tensor] : model->lora_state()) {
    adapter.tensors[name] = torch::randn(tensor.sizes()) * 0.2;
  }
  std::filesystem::remove_all(dir);
  io::write_peft_adapter(dir, adapter);
  return adapter;
}

// The tiny model of `model_dir` with `adapter` merged into its weights, written (with
// the tokenizer) into `dir`.
inline std::string write_merged_model_dir(const std::string& model_dir,
                                          const io::LoraAdapter& adapter, const std::string& dir) {
  namespace fs = std::filesystem;
  model::QwenForCausalLM model = model::load_pretrained_model(model_dir);
  const double scaling = adapter.config.scaling();
  {
    torch::NoGradGuard no_grad;
    auto params = model->named_parameters(/*recurse=*/true);
    for (const std::string& module : adapter.adapted_modules()) {
      const torch::Tensor a = adapter.tensors.at(io::lora_a_name(module));
      const torch::Tensor b = adapter.tensors.at(io::lora_b_name(module));
      params[module + ".weight"].add_(torch::matmul(b, a) * scaling);
    }
  }
  fs::remove_all(dir);
  model::save_pretrained_model(dir, model);
  fs::copy_file(fs::path(model_dir) / "tokenizer.json", fs::path(dir) / "tokenizer.json");
  return dir;
}

}  // namespace aspen::testing
