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
// the blocks together in tiles, online softmax in fp32, no gather). Elsewhere it is
// paged_attention_reference: composed ops that gather each sequence's keys and run
// masked softmax attention, on any device.
// Inference only: no autograd.
//
// Thread safety: pure functions apart from write_kv_cache, which writes the given
// slots of the cache; callers must not write one slot from two threads at once.
#pragma once

#include <torch/types.h>

#include <vector>

#include "aspen/kernels/imports.h"

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
};

// Writes k/v [T, K, D] of the new tokens into the cache at slot_mapping [T] int64
// (slot = block * S + offset).
void write_kv_cache(const torch::Tensor& k, const torch::Tensor& v, torch::Tensor& key_cache,
                    torch::Tensor& value_cache, const torch::Tensor& slot_mapping);

torch::Tensor paged_attention(const torch::Tensor& q, const torch::Tensor& key_cache,
                              const torch::Tensor& value_cache, const torch::Tensor& block_tables,
                              const torch::Tensor& query_start, const torch::Tensor& context_lens,
                              double scale);

torch::Tensor paged_attention_reference(const torch::Tensor& q, const torch::Tensor& key_cache,
                                        const torch::Tensor& value_cache,
                                        const torch::Tensor& block_tables,
                                        const torch::Tensor& query_start,
                                        const torch::Tensor& context_lens, double scale);

}  // namespace aspen::kernels
