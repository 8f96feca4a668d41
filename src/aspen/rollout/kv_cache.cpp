#include "aspen/rollout/kv_cache.h"

#include <algorithm>

#include "aspen/rollout/imports.h"

namespace aspen::rollout {
namespace {

// Per token and layer, one [heads, width] row in the key cache; MLA's latent row
// [kv_lora_rank + qk_rope_head_dim] doubles as the value row (mla_attention.h).
struct CacheRow {
  int64_t heads;
  int64_t width;
  bool separate_values;
};

CacheRow cache_row(const ModelConfig& config) {
  if (config.is_mla()) return {1, config.mla.kv_lora_rank + config.mla.qk_rope_head_dim, false};
  return {config.num_key_value_heads, config.head_dim, true};
}

}  // namespace

KvCache::KvCache(const ModelConfig& config, int64_t num_blocks, int64_t block_size,
                 torch::ScalarType dtype, torch::Device device)
    : num_blocks_(num_blocks), block_size_(block_size) {
  TORCH_CHECK(num_blocks > 0 && block_size > 0, "KvCache: sizes must be positive");
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  const CacheRow row = cache_row(config);
  for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
    keys_.push_back(torch::zeros({num_blocks, block_size, row.heads, row.width}, options));
    values_.push_back(row.separate_values ? torch::zeros_like(keys_.back()) : keys_.back());
  }
}

int64_t KvCache::bytes_per_block(const ModelConfig& config, int64_t block_size,
                                 torch::ScalarType dtype) {
  const CacheRow row = cache_row(config);
  return (row.separate_values ? 2 : 1) * config.num_hidden_layers * block_size * row.heads *
         row.width * static_cast<int64_t>(c10::elementSize(dtype));
}

int64_t KvCache::blocks_for_budget(const ModelConfig& config, int64_t block_size,
                                   torch::ScalarType dtype, int64_t budget_bytes) {
  return std::max<int64_t>(1, budget_bytes / bytes_per_block(config, block_size, dtype));
}

void KvCache::copy_block(BlockId source, BlockId destination) {
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    keys_[layer][destination].copy_(keys_[layer][source]);
    if (!values_[layer].is_same(keys_[layer])) {
      values_[layer][destination].copy_(values_[layer][source]);
    }
  }
}

PagedBatch KvCache::batch_view() const {
  PagedBatch batch;
  batch.key_caches = keys_;
  batch.value_caches = values_;
  return batch;
}

int64_t KvCache::bytes() const {
  int64_t total = 0;
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    const int64_t tensors = values_[layer].is_same(keys_[layer]) ? 1 : 2;
    total += tensors * keys_[layer].numel() * keys_[layer].element_size();
  }
  return total;
}

}  // namespace aspen::rollout
