// safetensors: reader (mmap, zero-copy where aligned) and writer.
//
// Format: u64 little-endian header length N, N bytes of JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}},
// padded with spaces to 8-byte alignment, then the data buffer. Offsets are
// relative to the buffer, must tile it exactly (no overlap, no holes) and match
// dtype x shape. Every malformation is an aspen::Error naming the file; no input
// can cause an out-of-bounds read.
#pragma once

#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aspen/io/imports.h"

namespace aspen::io {

class SafetensorsReader {
 public:
  // Maps `path` and validates the whole header. Throws aspen::Error on any problem.
  explicit SafetensorsReader(const std::string& path);

  // Tensor names in file order of their data offsets.
  const std::vector<std::string>& names() const;
  bool contains(const std::string& name) const;
  // A CPU tensor viewing the mapped bytes when suitably aligned (it keeps the
  // mapping alive), else a copy. Treat it as read-only. Dtypes torch lacks
  // (U16/U32/U64, F8 variants) throw aspen::Error naming the tensor.
  torch::Tensor tensor(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const;
  const std::string& path() const;

 private:
  struct Mapping;
  std::shared_ptr<Mapping> mapping_;
};

// Writes tensors (any device/dtype torch supports; made contiguous on CPU) in the
// order given, with optional metadata. Atomic: a temp file renamed into place.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Convenience: every tensor of one file, by name.
std::map<std::string, torch::Tensor> load_safetensors(const std::string& path);

}  // namespace aspen::io
