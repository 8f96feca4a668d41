// Loading and saving a Qwen model as an HF model directory:
//   config.json (io/hf_config.h) + model.safetensors or shards (io/model_dir.h).
//
// load_pretrained_model reads the config, builds the model, loads every weight
// (strict: missing/unexpected/wrong-shaped keys are aspen::Error naming the
// directory and key) and places it in `dtype` on `device`.
// save_pretrained_model writes config.json (torch_dtype set from the parameters)
// and the parameters under their HF names, tied models without lm_head.weight,
// so transformers loads the directory as the same model.
// Thread safety: none needed beyond io's: do not save into a directory being read.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>

#include "aspen/io/hf_config.h"
#include "aspen/io/hf_head.h"
#include "aspen/model/imports.h"
#include "aspen/model/qwen_model.h"

namespace aspen::model {

QwenForCausalLM load_pretrained_model(const std::string& dir,
                                      torch::ScalarType dtype = torch::kFloat,
                                      torch::Device device = torch::kCPU);

// The decoder dimensions and head config.json declares, checked against the weights
// on disk BEFORE a model is built from them: a config claiming a vocabulary of 10^12
// would otherwise allocate terabytes first (every tensor's shape is checked again on
// load). Checked: the embedding (and bos/eos ids below its rows), the layer count, the
// head (lm_head when untied, or a
// reward model's score), every layer's MLP kind (dense or MoE), and layer 0's
// attention and the first dense and MoE MLP's shapes and optional tensors (biases,
// q/k norms, shared experts). aspen::Error naming `config_path` and the keys.
void check_config_matches_weights(const ModelConfig& config, const HfHeadConfig& head,
                                  const std::map<std::string, torch::Tensor>& weights,
                                  const std::string& config_path);

// The checkpoint in `dir` as a model of `config` and `head` (its config.json) reads it:
// every tensor less the multi-token-prediction layers Aspen does not use (the log says
// so), checked by check_config_matches_weights. Every loader and `aspen info` use it,
// so info refuses exactly the directories that loading the model refuses.
std::map<std::string, torch::Tensor> load_weights_matching_config(const std::string& dir,
                                                                  const ModelConfig& config,
                                                                  const HfHeadConfig& head);

// Which weights save_pretrained_model writes of a model with LoRA adapters (model/lora.h);
// without adapters all three are hf_state().
enum class SavedWeights {
  kAll,     // hf_state(): base and adapters (an Aspen checkpoint; HF would not load it)
  kBase,    // the base only: the model the adapters apply to
  kMerged,  // merged_state(): base + scaling B A, a plain HF model
};

// max_shard_bytes <= 0 writes a single model.safetensors.
void save_pretrained_model(const std::string& dir, const QwenForCausalLM& model,
                           int64_t max_shard_bytes = 0, SavedWeights weights = SavedWeights::kAll);

}  // namespace aspen::model
