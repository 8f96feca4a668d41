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
#include "aspen/model/qwen_model.h"

namespace aspen {

QwenForCausalLM load_pretrained_model(const std::string& dir,
                                      torch::ScalarType dtype = torch::kFloat,
                                      torch::Device device = torch::kCPU);

// The decoder dimensions config.json declares, checked against the weights on disk
// BEFORE a model is built from them: a config claiming a vocabulary of 10^12 would
// otherwise allocate terabytes first (every tensor's shape is checked again on load).
// aspen::Error naming `config_path` and the keys.
void check_config_matches_weights(const ModelConfig& config,
                                  const std::map<std::string, torch::Tensor>& weights,
                                  const std::string& config_path);

// max_shard_bytes <= 0 writes a single model.safetensors.
void save_pretrained_model(const std::string& dir, const QwenForCausalLM& model,
                           int64_t max_shard_bytes = 0);

}  // namespace aspen
