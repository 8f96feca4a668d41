// The layout of one paged-attention step on the host, and the device indices the
// gathered (composed-op) attention path derives from it once per step.
//
// Why on the host: the runner builds the layout there (from each sequence's block
// table) before uploading it. Reading it back from the device in every layer (what
// paged attention did) is a blocking device-to-host copy, that is a stream
// synchronisation, per layer per step; checking it once here and carrying the host
// copy costs nothing.
//
// Shapes as in paged_attention.h: B sequences, M = max_blocks, S = block size,
// T = new tokens of the step.
// Thread safety: plain values and pure functions.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "aspen/kernels/imports.h"
#include "aspen/kernels/packed_upload.h"

namespace aspen::kernels {

struct PagedLayout {
  std::vector<int64_t> query_start;   // [B+1] offsets of each sequence's new tokens in q
  std::vector<int64_t> context_lens;  // [B] tokens cached after this step's writes
  std::vector<int64_t> block_tables;  // [B * max_blocks] row-major cache block ids
  int64_t max_blocks = 0;

  int64_t sequences() const { return static_cast<int64_t>(context_lens.size()); }
  // Throws (naming the sequence) unless query_start runs from 0 to total_tokens without
  // going back, every context holds its new tokens and fits max_blocks * block_size, and
  // every block a context uses is in [0, num_blocks).
  void check(int64_t block_size, int64_t num_blocks, int64_t total_tokens) const;
};

// The host layout of block_tables/query_start/context_lens tensors: three
// device-to-host copies when they are on a device. For callers without a host copy.
PagedLayout read_paged_layout(const torch::Tensor& block_tables, const torch::Tensor& query_start,
                              const torch::Tensor& context_lens);

// Sequences the gathered path attends in one call. A step splits into the decode rows
// (one new token each) and the multi-token rows by new-token count rounded up to a power
// of two, so padding at most doubles a group's queries and the number of calls per layer
// does not grow with B. G members, queries padded to n, keys padded to C.
struct PagedGroup {
  int64_t members = 0;          // G
  int64_t rows = 0;             // n: the most new tokens of a member
  int64_t context = 0;          // C: the longest context of a member
  bool whole_step = false;      // its queries are every row of q, in order, unpadded
  torch::Tensor query_rows;     // [G * n] row of q for each padded query (padding: a real row)
  torch::Tensor tokens;         // [T_g] the rows of q the group answers ...
  torch::Tensor padded;         // [T_g] ... and where each sits among the G * n queries
  torch::Tensor slots;          // [G * C] cache slot of key p of member g; past the member's
                                // context its last slot, a written one, masked out
  // [G, n, C] additive mask in the attention's dtype: 0 where padded query i of member
  // g sees key p, -inf elsewhere. Built once per step: SDPA would otherwise turn a bool
  // mask into this in every layer (three launches each).
  torch::Tensor mask;
};

// The additive attention mask of queries at query_positions [G, n, 1] (int64) over keys
// 0 .. context-1: [G, n, context] in `dtype`, 0 where key <= query position, -inf
// elsewhere. Its rows start at multiples of 16 elements (the tensor is a narrowed
// [G, n, context rounded up to 16]): memory-efficient SDPA on CUDA copies an unaligned
// mask into an aligned one in every call, that is in every layer.
torch::Tensor paged_attention_mask(const torch::Tensor& query_positions, int64_t context,
                                   torch::ScalarType dtype);

// Two phases so that a group's indices travel in the caller's one upload:
// stage_paged_groups adds them to `upload` (host work only), resolve_paged_groups reads
// them back after upload.upload(device) and derives the masks in `dtype` (the caches'),
// four launches per group.
struct StagedPagedGroup {
  int64_t members = 0, rows = 0, context = 0;
  bool whole_step = false;
  size_t query_rows = 0, tokens = 0, padded = 0, slots = 0, query_positions = 0;  // parts
};
std::vector<StagedPagedGroup> stage_paged_groups(const PagedLayout& layout, int64_t block_size,
                                                 PackedUpload& upload);
std::vector<PagedGroup> resolve_paged_groups(const std::vector<StagedPagedGroup>& staged,
                                             const PackedUpload& upload, torch::ScalarType dtype);

}  // namespace aspen::kernels
