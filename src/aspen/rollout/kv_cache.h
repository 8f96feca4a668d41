// KvCache: the key/value tensors of a paged cache, one pair per layer, laid out
// [N blocks, S block_size, K kv heads, D head_dim] on the model's device. Which
// sequence owns which block is BlockPool's business; this class only stores.
//
// Multi-head latent attention (DeepSeek-V3) stores instead one latent row per token
// and layer, [N, S, 1, kv_lora_rank + qk_rope_head_dim], and the value tensors are
// the key tensors (mla_attention.h reads both from it).
//
// Sizing: bytes_per_block = 2 (k and v) * L * S * K * D * element size (MLA: 1 * L *
// S * (kv_lora_rank + qk_rope_head_dim) * element size);
// blocks_for_budget() turns a byte budget into a block count.
// Thread safety: none; the owning engine serialises access.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "aspen/io/hf_config.h"
#include "aspen/kernels/paged_attention.h"
#include "aspen/rollout/block_pool.h"
#include "aspen/rollout/imports.h"

namespace aspen::rollout {

class KvCache {
 public:
  KvCache(const ModelConfig& config, int64_t num_blocks, int64_t block_size,
          torch::ScalarType dtype, torch::Device device);

  static int64_t bytes_per_block(const ModelConfig& config, int64_t block_size,
                                 torch::ScalarType dtype);
  static int64_t blocks_for_budget(const ModelConfig& config, int64_t block_size,
                                   torch::ScalarType dtype, int64_t budget_bytes);

  // Copies block `source` into `destination` in every layer (copy-on-write of a
  // shared partial block when a group forks).
  void copy_block(BlockId source, BlockId destination);

  // A PagedBatch whose cache handles point at this storage; the caller fills the
  // per-step metadata.
  PagedBatch batch_view() const;

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t bytes() const;

 private:
  int64_t num_blocks_;
  int64_t block_size_;
  std::vector<torch::Tensor> keys_;    // per layer [N, S, K, D]
  std::vector<torch::Tensor> values_;  // per layer [N, S, K, D]
};

}  // namespace aspen::rollout
