// A Hugging Face model directory: weights (one safetensors file, or shards plus
// model.safetensors.index.json) and the optional generation_config.json.
//
// Layout, as transformers writes it:
//   model.safetensors                      one file, or
//   model-00001-of-00003.safetensors ...   shards, with
//   model.safetensors.index.json           {"metadata": {"total_size": N},
//                                           "weight_map": {tensor: shard file}}
// config.json is read by load_hf_config (hf_config.h).
//
// Loaded tensors are zero-copy views of the mapped files where aligned (each
// keeps its file's mapping alive); treat them as read-only (writes go to private
// copy-on-write pages and never reach the file). Errors are aspen::Error naming
// the offending file. Thread safety: free functions without shared state; do not
// save into a directory another thread or process is loading from.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aspen/io/imports.h"

namespace aspen::io {

constexpr const char* kSingleWeightsFile = "model.safetensors";
constexpr const char* kWeightsIndexFile = "model.safetensors.index.json";

// `dir`, named by the flag or key `what` (--model, model.path), is an existing
// directory; else aspen::Error naming "`what` `dir`" and what an HF model directory holds.
void check_model_dir(const std::string& dir, const std::string& what);

// Every tensor of the checkpoint in `dir`, by name. Prefers model.safetensors
// when present (as transformers does), else the index. With an index, every
// shard must exist, shard names must be plain file names inside `dir`, and the
// names in the weight map and the tensors in the shards must match one to one.
std::map<std::string, torch::Tensor> load_model_weights(const std::string& dir);

// Writes `tensors` (in order) into `dir` (created if missing). max_shard_bytes <= 0,
// or everything fitting in one shard, gives model.safetensors; otherwise shards of
// at most max_shard_bytes (a larger tensor gets a shard to itself) named
// model-0000i-of-0000n.safetensors plus the index. Weight files of another
// layout left in `dir` by an earlier save are removed so loading stays unambiguous.
void save_model_weights(const std::string& dir,
                        const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                        int64_t max_shard_bytes = 0);

// Sampling defaults a model ships in generation_config.json. Absent keys stay unset.
struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;  // HF allows an int or a list; always a list here
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<bool> do_sample;
};

// nullopt if `dir` has no generation_config.json; throws aspen::Error naming the
// file and key for malformed content.
std::optional<GenerationConfig> read_generation_config(const std::string& dir);

}  // namespace aspen::io
