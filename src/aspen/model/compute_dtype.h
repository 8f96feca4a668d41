// The compute dtypes a model runs in, by the names configs and flags use: fp32
// (float32) and bf16 (bfloat16). aspen::Error naming `where` for anything else.
// Header-only; thread safety: a pure function.
#pragma once

#include <torch/types.h>

#include <string>

#include "aspen/model/imports.h"
#include "aspen/util/error.h"

namespace aspen::model {

inline torch::ScalarType parse_compute_dtype(const std::string& name, const std::string& where) {
  if (name == "fp32" || name == "float32") return torch::kFloat32;
  if (name == "bf16" || name == "bfloat16") return torch::kBFloat16;
  throw Error("unsupported compute dtype \"" + name + "\"", where, "use fp32 or bf16");
}

}  // namespace aspen::model
