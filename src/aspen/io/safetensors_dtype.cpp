#include "aspen/io/safetensors_dtype.h"

#include <iterator>

#include "aspen/io/imports.h"

namespace aspen::io {
namespace {

// Order follows the spec's Dtype enum. F8_E4M3 is the "fn" (finite) variant torch
// calls Float8_e4m3fn; it and the rest of the small floats are libtorch 2.x-only,
// so they are describable but not loadable here.
const SafetensorsDtype kDtypes[] = {
    {"BOOL", 8, torch::kBool},      {"F4", 4, std::nullopt},           {"F6_E2M3", 6, std::nullopt},
    {"F6_E3M2", 6, std::nullopt},   {"U8", 8, torch::kByte},           {"I8", 8, torch::kChar},
    {"F8_E5M2", 8, std::nullopt},   {"F8_E4M3", 8, std::nullopt},      {"F8_E8M0", 8, std::nullopt},
    {"I16", 16, torch::kShort},     {"U16", 16, std::nullopt},         {"F16", 16, torch::kHalf},
    {"BF16", 16, torch::kBFloat16}, {"I32", 32, torch::kInt},          {"U32", 32, std::nullopt},
    {"F32", 32, torch::kFloat},     {"C64", 64, torch::kComplexFloat}, {"F64", 64, torch::kDouble},
    {"I64", 64, torch::kLong},      {"U64", 64, std::nullopt},
};

}  // namespace

const SafetensorsDtype* find_safetensors_dtype(const std::string& name) {
  for (const SafetensorsDtype& dtype : kDtypes) {
    if (name == dtype.name) return &dtype;
  }
  return nullptr;
}

const SafetensorsDtype* find_safetensors_dtype(torch::ScalarType type) {
  for (const SafetensorsDtype& dtype : kDtypes) {
    if (dtype.torch_type && *dtype.torch_type == type) return &dtype;
  }
  return nullptr;
}

}  // namespace aspen::io
