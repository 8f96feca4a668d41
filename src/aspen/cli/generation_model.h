// The model, tokenizer and engine settings of the commands that generate (generate,
// serve), built one way from their shared flags: --model, --dtype, and --kv-cache-mb or
// --kv-cache-fraction.
//
// Contract of load_generation_model:
//   - the caller has set the compute threads, resolved `device` (a missing GPU fails
//     before any file is read) and read the model's generation config, so that its
//     own flags fail before the slow part, the model's weights, is read;
//   - the tokenizer and the model come from `model_dir`, the model in `dtype` on
//     `device`;
//   - `engine` carries the KV cache bytes (a fraction is measured on `device` after the
//     model is loaded, so it is a share of what the model left free) and the EOS ids
//     (generation_config.json's over config.json's, rollout/generation_defaults.h).
//     Every other EngineConfig field keeps its default: the caller sets what its own
//     flags say (seed, max_num_seqs, max_model_len) before building the engine.
// Errors: aspen::Error naming the file or the flag (--dtype, --kv-cache-mb,
// --kv-cache-fraction).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "aspen/cli/dtype_option.h"
#include "aspen/cli/imports.h"
#include "aspen/cli/kv_cache_option.h"
#include "aspen/io/model_dir.h"
#include "aspen/model/pretrained.h"
#include "aspen/rollout/engine.h"
#include "aspen/rollout/generation_defaults.h"
#include "aspen/tokenizer/tokenizer.h"

namespace aspen::cli {

// The flags load_generation_model reads.
struct GenerationModelOptions {
  std::string model_dir;
  std::string dtype;  // "fp32" | "bf16"
  int64_t kv_cache_mb = 0;
  std::optional<double> kv_cache_fraction;  // of the memory free after loading the model
};

struct GenerationModel {
  std::shared_ptr<const Tokenizer> tokenizer;
  QwenForCausalLM model;
  EngineConfig engine;
};

inline GenerationModel load_generation_model(const GenerationModelOptions& options,
                                             const torch::Device& device,
                                             const std::optional<GenerationConfig>& generation) {
  GenerationModel loaded{
      std::make_shared<const Tokenizer>(Tokenizer::from_file(options.model_dir)),
      load_pretrained_model(options.model_dir, parse_compute_dtype(options.dtype), device),
      EngineConfig{}};
  loaded.engine.kv_cache_bytes =
      kv_cache_bytes_of(options.kv_cache_mb, options.kv_cache_fraction, device);
  loaded.engine.eos_token_ids = model_eos_token_ids(loaded.model->config, generation);
  return loaded;
}

}  // namespace aspen::cli
