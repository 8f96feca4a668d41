// Shared fixture data for the tokenizer tests that run against the real Qwen3
// tokenizer.json (shared/fixtures/qwen3-tokenizer, see support/oracles.h) and the golden
// files produced by tools/python/tokenizer_oracle.py (HF tokenizers from PyPI).
// A missing fixture is a failure, not a skip: these tests are the parity guarantee.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/tokenizer/tokenizer.h"
#include "support/oracles.h"

namespace aspen::testing {

using namespace aspen::tokenizer;

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

// The Qwen3 tokenizer, loaded once per test binary (loading parses ~11 MB of JSON).
inline const Tokenizer& qwen3_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_file(qwen3_tokenizer_json());
  return tokenizer;
}

}  // namespace aspen::testing
