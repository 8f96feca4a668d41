// Packed variable-length batches: B sequences laid end to end in one token
// tensor, described by cu_seqlens offsets (no pad tokens anywhere).
//
// Shapes: T = packed tokens, B = sequences.
//   input_ids [T] int64, cu_seqlens [B+1] int64 with cu_seqlens[0] = 0,
//   non-decreasing, cu_seqlens[B] = T. Empty sequences are allowed.
//
// Errors: malformed input_ids / cu_seqlens are aspen::Error naming the argument
// (they come from callers' data, not from this code). Thread safety: pure functions.
#pragma once

#include <torch/types.h>

#include <vector>

#include "aspen/model/imports.h"

namespace aspen::model {

// Validates and returns cu_seqlens as host offsets. Token ids are range-checked
// against vocab_size when input_ids is on the CPU (free) - on an accelerator the
// check would cost a sync, and the embedding lookup fails loudly there anyway.
std::vector<int64_t> check_packed_batch(const torch::Tensor& input_ids,
                                        const torch::Tensor& cu_seqlens, int64_t vocab_size);

// positions [T] int64 on `device`: 0, 1, ... restarting at every sequence start.
torch::Tensor packed_positions(const std::vector<int64_t>& offsets, torch::Device device);

// Rows that predict a next token inside their own sequence: every token but the
// last of each sequence (n-1 per sequence of length n, none for n <= 1), in
// packed order, as row indices [R] int64 on `device`. Their targets are the rows + 1.
torch::Tensor next_token_rows(const std::vector<int64_t>& offsets, torch::Device device);

}  // namespace aspen::model
