// Attention over a paged (block) KV cache, for rollout decode and chunked prefill.
//
// Shapes: T = new (query) tokens of the step, B = sequences in the step,
// H = query heads, K = kv heads (H % K == 0; query head h uses kv head h / (H/K)),
// D = head_dim, N = cache blocks, S = block_size, M = max blocks per sequence.
//   key_cache, value_cache [N, S, K, D]      one layer's cache (any float dtype)
//   block_tables [B, M] int32/int64         cache block of each sequence's logical block
//   query_start [B+1] int64                 offsets of each sequence's new tokens in q
//   context_lens [B] int64                  tokens in the cache per sequence after this
//                                           step's writes (cached + new)
//   q [T, H, D] -> out [T, H, D]
// The i-th of the n new tokens of sequence b sits at position
// context_lens[b] - n + i and attends to cache positions 0 ..= that position, so
// chunked prefill (n > 1, history already cached) and decode (n = 1) are one case.
// The new tokens' k/v must already be in the cache (write_kv_cache).
//
// paged_attention, when everything is on the CPU: a sequence whose context reaches 128
// tokens goes through at::scaled_dot_product_attention (its whole cache blocks gathered
// once, the new tokens masked causally with their offset: torch's vectorised flash
// kernel, fp32 accumulation, GQA without repeating k/v); the other sequences through
// one fused pass (per query token and kv head, the kv group's query heads stream over
// the blocks together in tiles, online softmax in fp32, no gather). Elsewhere (CUDA) it
// is paged_attention_gathered: composed torch ops vectorised over the step's sequences,
// a fixed number of launches per layer whatever B is (paged_layout.h's groups: one for
// the decode rows, one per power-of-two bucket of multi-token rows), each
//   gather every member's keys/values through its block table into [G, K, C, D]
//   (index_select; one gather when the caches are one tensor, MLA), then one
//   at::scaled_dot_product_attention with a [G, 1, n, C] length/causal mask.
// GQA without repeating k/v: a decode group views q as [G, K, H/K, D], the H/K query
// heads of a kv head as its query rows; a multi-token group passes enable_gqa. Softmax
// statistics in fp32 in every SDPA backend. Keys are padded to the group's longest
// context: the gather costs G * C rows where the sequences hold sum(C_b).
// paged_attention_reference: the per-sequence composed-op loop (a host loop, fp32,
// repeated k/v), kept as the test oracle.
//
// The PagedBatch overload takes the layout from the batch's host copy (checked once per
// step by whoever builds it) and the batch's prepared groups: no device-to-host copy in
// any layer. Prepared groups mean the gathered path on any device (on the CPU: how the
// tests run a GPU's path); without them the CPU takes the fused kernel. The tensor overload reads the layout back (three
// copies) and builds the groups itself (one upload): for callers without a batch.
// Inference only: no autograd.
//
// Thread safety: pure functions apart from write_kv_cache, which writes the given
// slots of the cache; callers must not write one slot from two threads at once.
#pragma once

#include <torch/types.h>

#include <vector>

#include "aspen/kernels/imports.h"
#include "aspen/kernels/paged_layout.h"

namespace aspen::kernels {

// Everything one forward step over the paged cache needs, shared by all layers.
// The cache tensors are handles onto the engine's storage: writes land there.
struct PagedBatch {
  std::vector<torch::Tensor> key_caches;    // per layer [N, S, K, D]
  std::vector<torch::Tensor> value_caches;  // per layer [N, S, K, D]
  torch::Tensor slot_mapping;               // [T] int64, where each new token's k/v goes
  torch::Tensor block_tables;               // [B, M] int32
  torch::Tensor query_start;                // [B+1] int64
  torch::Tensor context_lens;               // [B] int64, after this step's writes
  PagedLayout layout;                       // the three above on the host, checked
  std::vector<PagedGroup> groups;           // the gathered path's indices (off the CPU)
};

// Writes k/v [T, K, D] of the new tokens into the cache at slot_mapping [T] int64
// (slot = block * S + offset).
void write_kv_cache(const torch::Tensor& k, const torch::Tensor& v, torch::Tensor& key_cache,
                    torch::Tensor& value_cache, const torch::Tensor& slot_mapping);

torch::Tensor paged_attention(const torch::Tensor& q, const torch::Tensor& key_cache,
                              const torch::Tensor& value_cache, const torch::Tensor& block_tables,
                              const torch::Tensor& query_start, const torch::Tensor& context_lens,
                              double scale);

// One layer of the step `batch` describes: layout and groups from the batch.
torch::Tensor paged_attention(const torch::Tensor& q, const torch::Tensor& key_cache,
                              const torch::Tensor& value_cache, const PagedBatch& batch,
                              double scale);

// The composed-op path on any device, given the step's groups (paged_layout.h).
torch::Tensor paged_attention_gathered(const torch::Tensor& q, const torch::Tensor& key_cache,
                                       const torch::Tensor& value_cache,
                                       const std::vector<PagedGroup>& groups, double scale);

torch::Tensor paged_attention_reference(const torch::Tensor& q, const torch::Tensor& key_cache,
                                        const torch::Tensor& value_cache,
                                        const torch::Tensor& block_tables,
                                        const torch::Tensor& query_start,
                                        const torch::Tensor& context_lens, double scale);

}  // namespace aspen::kernels
