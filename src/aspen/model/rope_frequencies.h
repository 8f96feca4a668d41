// The RoPE table a model's config asks for: plain RoPE (theta) or YaRN-scaled
// (io/hf_config.h: RopeScaling), computed in fp32 exactly as transformers'
// _compute_default_rope_parameters / _compute_yarn_parameters do, over the model's
// rope width (head_dim; DeepSeek-V3's qk_rope_head_dim).
// Thread safety: pure functions.
#pragma once

#include <torch/types.h>

#include "aspen/io/hf_config.h"
#include "aspen/kernels/rope.h"
#include "aspen/model/imports.h"

namespace aspen::model {

// [head_dim / 2] fp32 on the CPU.
torch::Tensor rope_inverse_frequencies(const ModelConfig& config);

// positions [T] int64 -> the table every layer of one forward shares.
RopeTable model_rope_table(const ModelConfig& config, const torch::Tensor& positions);

}  // namespace aspen::model
