// Parsing of the --dtype option shared by the model commands.
#pragma once

#include <torch/types.h>

#include <string>

#include "aspen/util/error.h"

namespace aspen::cli {

// "fp32" | "bf16" -> torch dtype; anything else is an aspen::Error naming --dtype.
inline torch::ScalarType parse_compute_dtype(const std::string& name) {
  if (name == "fp32" || name == "float32") return torch::kFloat32;
  if (name == "bf16" || name == "bfloat16") return torch::kBFloat16;
  throw Error("unsupported compute dtype \"" + name + "\"", "--dtype", "use fp32 or bf16");
}

}  // namespace aspen::cli
