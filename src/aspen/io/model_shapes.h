// The shapes of published checkpoints, for what needs a real-sized model without a
// download: benchmarks build random weights of them, cost models count their
// parameters. One definition, so every "0.6B" figure is of the same model.
#pragma once

#include "aspen/io/hf_config.h"
#include "aspen/io/imports.h"

namespace aspen::io {

// Qwen3-0.6B (its config.json): 28 layers, hidden 1024, 16 query / 8 kv heads of 128,
// MLP 3072, vocabulary 151,936, tied embeddings; 596,049,920 parameters.
inline ModelConfig qwen3_0_6b_shape() {
  ModelConfig c;
  c.family = ModelFamily::kQwen3;
  c.vocab_size = 151936;
  c.hidden_size = 1024;
  c.intermediate_size = 3072;
  c.num_hidden_layers = 28;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 40960;
  c.tie_word_embeddings = true;
  return c;
}

}  // namespace aspen::io
