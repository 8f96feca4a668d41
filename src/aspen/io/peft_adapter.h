// A LoRA adapter in PEFT's on-disk format, read and written so that
// peft.PeftModel.from_pretrained(base, dir) loads what Aspen writes and Aspen loads what
// PEFT's save_pretrained writes (checked against peft 0.21.2 in tests/io).
//
// Layout of the directory:
//   adapter_config.json         LoraConfig's fields: peft_type "LORA", r, lora_alpha, ...
//   adapter_model.safetensors   per adapted linear `M` (e.g. model.layers.0.self_attn.q_proj):
//                                 "base_model.model.M.lora_A.weight"  [r, in_features]
//                                 "base_model.model.M.lora_B.weight"  [out_features, r]
//                               with metadata {"format": "pt"}
// The keys are PeftModel's parameter names with the adapter name (".default") taken out,
// as get_peft_model_state_dict saves them; "base_model.model." is PeftModel's wrapper
// prefix (transformers' own adapter save adds it too), so M is the base model's module
// name and "M.lora_A.weight" is exactly the name of the adapter parameter in Aspen's
// model, which registers lora_A / lora_B inside each adapted Linear.
// The adapter's output is x·W^T + scaling() · (dropout(x)·A^T)·B^T.
//
// What Aspen cannot apply is an aspen::Error naming the file and the field or tensor,
// never a silently different model: use_dora and the other LoRA variants (arrow, bdlora,
// aLoRA, VeLoRA, MonteCLoRA, KaSA, MiCA, QALoRA), rank_pattern / alpha_pattern (per-module
// rank or alpha: one scaling for all modules here), modules_to_save, trainable tokens,
// bias != "none" or lora_bias, fan_in_fan_out, layers_to_transform, exclude_modules,
// target_parameters, layer_replication, an init_lora_weights that changes the base weights
// (PiSSA, OLoRA, CorDA, LoftQ, LoRA-GA), a task_type other than CAUSAL_LM, LoRA on
// embeddings (lora_embedding_A/B), a key that is not a Linear's lora_A / lora_B, a module
// with only one of them, ranks or shapes that disagree, and a config key this code does not
// know whose value is not a default (null, false, {} or []) - a later PEFT's new option.
//
// target_modules: PEFT's list of module-name suffixes is kept as written; each adapted
// module must match one (equal, or ending in "." + entry, as PEFT matches). A string is a
// Python regex PEFT matched against full module names: Aspen does not evaluate it but
// reads the modules PEFT adapted from the tensors, and target_modules becomes their last
// name components (e.g. ["q_proj", "v_proj"]). The tensors are the authority on which
// modules carry an adapter (adapted_modules()): a model loading one must find a tensor
// pair for each module it adapts and an adapted module for each pair.
//
// Thread safety: free functions without shared state; do not write into a directory
// another thread or process is reading from.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "aspen/io/imports.h"

namespace aspen::io {

constexpr const char* kPeftConfigFile = "adapter_config.json";
constexpr const char* kPeftWeightsFile = "adapter_model.safetensors";

struct LoraAdapterConfig {
  int64_t rank = 8;        // "r"
  double alpha = 8.0;      // "lora_alpha"
  double dropout = 0.0;    // "lora_dropout", on the adapter's input while training
  // Module-name suffixes PEFT adapts ("q_proj", ...). A set to PEFT, which writes it in
  // its set's order (it varies from run to run): read_peft_adapter sorts it.
  std::vector<std::string> target_modules;
  bool use_rslora = false;  // scaling alpha / sqrt(r) (rank-stabilised LoRA) instead of alpha / r
  std::string base_model;  // "base_model_name_or_path"; empty writes null

  // The factor on B·A: alpha / rank, or alpha / sqrt(rank) under use_rslora.
  double scaling() const;
  // Throws aspen::Error naming `source` for rank < 1, a non-finite alpha, dropout outside
  // [0, 1), an empty target_modules or an empty or repeated entry.
  void validate(const std::string& source) const;

  bool operator==(const LoraAdapterConfig& other) const {
    return rank == other.rank && alpha == other.alpha && dropout == other.dropout &&
           target_modules == other.target_modules && use_rslora == other.use_rslora &&
           base_model == other.base_model;
  }
};

struct LoraAdapter {
  LoraAdapterConfig config;
  // By the model's parameter name: "<module>.lora_A.weight" [rank, in] and
  // "<module>.lora_B.weight" [out, rank], floating point (written in their dtype; fp32 is
  // typical), on any device.
  std::map<std::string, torch::Tensor> tensors;

  // The adapted modules ("model.layers.0.self_attn.q_proj", ...), sorted, each once.
  std::vector<std::string> adapted_modules() const;
};

// The model's parameter names of module `module`'s adapter.
std::string lora_a_name(const std::string& module);
std::string lora_b_name(const std::string& module);

// Reads `dir`/adapter_config.json and `dir`/adapter_model.safetensors. The tensors are CPU
// copies (not views of the mapped file) in the file's dtype. Throws aspen::Error naming the
// file and the field or tensor for a missing file (including a pickled adapter_model.bin
// without the safetensors file), malformed JSON or anything listed at the top.
LoraAdapter read_peft_adapter(const std::filesystem::path& dir);

// Writes `adapter` into `dir` (created with its parents when missing), each file atomically,
// the tensors first, so a reader never sees a config without its weights. The config holds
// the LoraConfig fields that PEFT has known since 0.9 (r, lora_alpha, lora_dropout,
// target_modules, use_rslora, use_dora, bias, fan_in_fan_out, init_lora_weights, ...;
// PEFT fills the newer ones with their defaults), so older and newer PEFT and vLLM all read
// it. Validates everything read_peft_adapter would check first (aspen::Error naming
// `dir`), and writes nothing then.
void write_peft_adapter(const std::filesystem::path& dir, const LoraAdapter& adapter);

}  // namespace aspen::io
