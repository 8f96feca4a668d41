// A tiny random Qwen3 model directory written by Aspen itself (no Python oracle), with
// the 15-token test tokenizer: enough for the commands that load a model (info,
// logprobs, generate) to run in well under a second, so their input checks can be
// tested against a model they would otherwise accept.
#pragma once

#include <filesystem>
#include <string>

#include "aspen/model/pretrained.h"
#include "aspen/model/weights_init.h"
#include "model/tiny_configs.h"

// Declared here: in a unity batch this header may come before any file that opens it.
namespace aspen::cli {}

namespace aspen::testing {

using namespace aspen::cli;

// Writes the model into `dir` (replaced) and returns it. Vocabulary 50, context
// `max_position_embeddings`.
inline std::string write_tiny_model_dir(const std::string& dir,
                                        int64_t max_position_embeddings = 32768) {
  namespace fs = std::filesystem;
  ModelConfig config = tiny_config(ModelFamily::kQwen3, /*tied=*/false, /*head_dim=*/8);
  config.max_position_embeddings = max_position_embeddings;
  fs::remove_all(dir);
  save_pretrained_model(dir, make_random_model(config, /*seed=*/1));
  fs::copy_file(ASPEN_SOURCE_DIR "/tests/tokenizer/data/tiny_tokenizer.json",
                fs::path(dir) / "tokenizer.json");
  return dir;
}

}  // namespace aspen::testing
