// The JSON header of a safetensors file: parsing with full validation, and
// serialisation in the byte layout the reference implementation writes.
//
// Kept apart from the file I/O so every rule can be checked on plain bytes.
// Validation follows huggingface/safetensors: offsets relative to the data buffer
// must tile [0, buffer_size) exactly (no overlap, no hole, nothing past the end)
// and each tensor's byte size must equal numel x dtype size, computed without
// overflow. After a successful parse every entry can be read without going out
// of bounds.
//
// Thread safety: pure functions; safe to call concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "aspen/io/imports.h"
#include "aspen/io/safetensors_dtype.h"

namespace aspen::io {

// The header length field is rejected above this (the reference's limit), so a
// corrupt length cannot make us parse or allocate gigabytes.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsEntry {
  std::string name;
  const SafetensorsDtype* dtype = nullptr;
  std::vector<int64_t> shape;  // empty: a 0-d scalar
  uint64_t begin = 0;          // byte offsets into the data buffer, [begin, end)
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> tensors;  // sorted by data offsets
  std::map<std::string, std::string> metadata;
};

// Parses and validates header bytes (JSON, possibly space-padded) against a data
// buffer of `buffer_size` bytes. Throws aspen::Error naming `source` and, where
// one is at fault, the tensor.
SafetensorsHeader parse_safetensors_header(const char* data, uint64_t size, uint64_t buffer_size,
                                           const std::string& source);

// Compact JSON ("__metadata__" first when non-empty, then tensors in the given
// order) padded with spaces to a multiple of 8 bytes. Entries must already tile
// the buffer; names must be distinct.
std::string serialize_safetensors_header(const std::vector<SafetensorsEntry>& tensors,
                                         const std::map<std::string, std::string>& metadata);

}  // namespace aspen::io
