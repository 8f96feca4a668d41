// The dtype strings of the safetensors format and how they map onto torch.
//
// Every dtype of the current spec is recognised (so a file using one is
// described precisely rather than rejected as garbage), with its size in bits:
// sub-byte types (F4: 4 bits, F6_*: 6 bits) pack elements, so a tensor's byte
// size is numel * bits / 8 and must come out whole. Only the dtypes Aspen
// computes with or converts from map to a torch::ScalarType; the rest (unsigned wider
// than 8 bits, the float8/6/4 variants) can be described but not loaded.
//
// Thread safety: immutable tables; safe to use concurrently.
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

#include "aspen/io/imports.h"

namespace aspen::io {

struct SafetensorsDtype {
  const char* name;                             // as written in the header, e.g. "BF16"
  int bits;                                     // bits per element
  std::optional<torch::ScalarType> torch_type;  // nullopt: torch cannot hold it
};

// The entry for a header dtype string, or nullptr if the string is not a dtype.
const SafetensorsDtype* find_safetensors_dtype(const std::string& name);

// The entry for a torch dtype, or nullptr if safetensors has no name for it.
const SafetensorsDtype* find_safetensors_dtype(torch::ScalarType type);

}  // namespace aspen::io
