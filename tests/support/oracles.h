// Where the test oracles live. Every test that runs a reference program or reads the
// real Qwen3 tokenizer takes its paths from here.
//
// - python(): the interpreter of scripts/setup's virtualenv, which has HF transformers,
//   tokenizers, safetensors, numpy and tensorboard at the pinned versions
//   (tools/python/requirements.txt). CMake passes it as ASPEN_PYTHON.
// - qwen3_tokenizer_dir(): the real Qwen3 tokenizer.json and tokenizer_config.json, kept
//   in shared/fixtures/qwen3-tokenizer beside the clone (CI has it too).
// A missing oracle is a failure, never a skip: these tests are the parity guarantee.
#pragma once

#include <string>

namespace aspen::testing {

inline std::string python() { return ASPEN_PYTHON; }

inline std::string qwen3_tokenizer_dir() { return ASPEN_QWEN3_TOKENIZER_DIR; }

inline std::string qwen3_tokenizer_json() { return qwen3_tokenizer_dir() + "/tokenizer.json"; }

// tools/python/<name>: the reference scripts run under python().
inline std::string oracle_script(const std::string& name) {
  return std::string(ASPEN_SOURCE_DIR) + "/tools/python/" + name;
}

}  // namespace aspen::testing
