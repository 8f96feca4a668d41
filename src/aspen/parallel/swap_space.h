// SwapSpace: moves the bytes of a set of named tensors off their device and back,
// keeping the tensor objects. It is the "swap" half of allgather-swap
// (shared/DESIGN.md, "The resharding flow"): while a colocated rollout runs, the
// trainer's optimizer moments and gradients leave the device and return before the
// next update.
//
// Where the bytes go:
//   CPU tensors   -> one swap file in `directory` (pwrite/pread). Their storage is
//                    freed and glibc is asked to return free heap pages to the OS
//                    (malloc_trim), so the process RSS really drops. The file lives
//                    in the page cache until the kernel writes it back; point the
//                    directory at a disk, not a tmpfs (on a tmpfs the bytes stay in
//                    RAM; a warning is logged).
//   other devices -> host memory, pinned when options.pin_memory and the pinned
//   (CUDA, ...)      allocator works (else pageable). The device storage goes back to
//                    its caching allocator, where a rollout in the same process
//                    reuses it; copies are blocking.
//
// Identity: swap_out() keeps each tensor object (its TensorImpl) and points it at an
// empty storage (Tensor::set_), so numel() is 0 while swapped out; swap_in() points
// the same object at a fresh storage holding the original bytes, with the original
// offset, sizes, strides and dtype. Whoever holds the tensor (torch::optim::AdamW's
// state map, a parameter's .grad()) sees it restored bit for bit, with no
// re-registration. Tensors of the set that shared a storage share one again after
// swap_in (it is swapped once). A storage also referenced by a tensor OUTSIDE the set
// is an Error: its memory could not be freed and the alias would silently break
// (pass every view, e.g. a gradient bucket and the grads that view it).
//
// Protocol: swap_out(set) then swap_in(), repeatedly. swap_out() while swapped out is
// an Error (the caller lost track of what is out; a second set would be ambiguous).
// swap_in() while nothing is out is a no-op, so "make resident before the update" can
// be called unconditionally. The tensors must not be used or replaced while out:
// swap_in() checks each still has its empty placeholder storage and throws otherwise.
// Undefined tensors are ignored; sparse/non-strided tensors are an Error.
// Destroying a SwapSpace that is swapped out swaps back in first (best effort,
// failures logged), then removes the swap file.
//
// Errors: aspen::Error naming the swap file (or directory) for a file that cannot be
// created, written (e.g. disk full: space is reserved up front) or read, and naming
// the tensor for bad input. A failed swap_out leaves every tensor untouched; a failed
// swap_in leaves them swapped out (it can be retried).
// Thread safety: none. One thread (the trainer's) owns the SwapSpace and the tensors.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "aspen/parallel/imports.h"

namespace aspen::parallel {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

struct SwapSpaceOptions {
  // Directory of the CPU swap file; empty: the system temp dir (TMPDIR, else /tmp).
  std::string directory;
  // Stage device tensors in page-locked host memory (faster copies) when possible.
  bool pin_memory = true;
};

class SwapSpace {
 public:
  // Creates the (empty) swap file now, so a bad directory fails at setup rather than
  // at the first rollout.
  explicit SwapSpace(SwapSpaceOptions options = {});
  ~SwapSpace();
  SwapSpace(const SwapSpace&) = delete;
  SwapSpace& operator=(const SwapSpace&) = delete;

  void swap_out(const NamedTensors& tensors);
  void swap_in();

  bool swapped_out() const { return swapped_out_; }
  // Bytes currently swapped out (whole storages, each counted once); 0 when resident.
  int64_t swapped_bytes() const;
  // Of those, bytes in the swap file (the CPU ones).
  int64_t file_bytes() const;
  const std::string& file_path() const { return path_; }

 private:
  // One storage being swapped, shared by one or more entries.
  struct Block {
    std::string name;  // first tensor naming it, for messages
    c10::Device device = c10::kCPU;
    int64_t nbytes = 0;
    int64_t file_offset = -1;  // CPU: where its bytes are in the file
    torch::Tensor host;        // non-CPU: the host copy (uint8)
  };
  // One tensor object and the view it had of its block's storage.
  struct Entry {
    std::string name;
    torch::Tensor tensor;
    size_t block = 0;
    int64_t storage_offset = 0;
    std::vector<int64_t> sizes;
    std::vector<int64_t> strides;
  };

  void write_file_blocks();
  void read_block(const Block& block, torch::Tensor& bytes) const;
  void release_file_space();

  SwapSpaceOptions options_;
  std::string path_;
  int fd_ = -1;
  bool swapped_out_ = false;
  std::vector<Block> blocks_;
  std::vector<Entry> entries_;
};

}  // namespace aspen::parallel
