// PackedUpload: several small int64 host arrays (a step's token ids, positions, slots,
// block tables, ...) sent to the device in ONE copy instead of one blocking copy each.
//
// Parts are staged into one host buffer (page-locked when the target is CUDA, so the
// copy is asynchronous: torch's caching host allocator keeps the buffer alive until the
// copy has run), copied with non_blocking, and handed out as views of the one device
// tensor. For a CPU target the staged buffer itself is the result: no copy at all.
// A double is staged by its bits (add_doubles) and read back with part(...).view(kDouble).
//
// Contract: add* before upload(), part() after; a part's shape must hold its values.
// Thread safety: none; one per step and thread.
#pragma once

#include <torch/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "aspen/kernels/imports.h"

namespace aspen::kernels {

class PackedUpload {
 public:
  // Stages `values`; shape defaults to [values.size()]. Returns the part's handle.
  size_t add(const std::vector<int64_t>& values, std::vector<int64_t> shape = {});
  size_t add_doubles(const std::vector<double>& values);

  // The one host-to-device copy (none for a CPU device).
  void upload(torch::Device device);

  // Part `handle` on the device, shaped as staged.
  torch::Tensor part(size_t handle) const;

 private:
  struct Part {
    size_t offset;
    std::vector<int64_t> shape;
  };
  std::vector<int64_t> staged_;
  std::vector<Part> parts_;
  torch::Tensor device_;
};

}  // namespace aspen::kernels
