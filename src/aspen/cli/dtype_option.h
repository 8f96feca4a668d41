// Parsing of the --dtype option shared by the model commands.
#pragma once

#include <torch/types.h>

#include <string>

#include "aspen/cli/imports.h"
#include "aspen/model/compute_dtype.h"

namespace aspen::cli {

// "fp32" | "bf16" -> torch dtype; anything else is an aspen::Error naming --dtype.
inline torch::ScalarType parse_compute_dtype(const std::string& name) {
  return aspen::model::parse_compute_dtype(name, "--dtype");
}

}  // namespace aspen::cli
