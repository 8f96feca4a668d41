// WordCache: memo of BPE results per pre-token (raw bytes -> ids). Prose repeats a
// small set of words, so after warm-up almost every word is a hash lookup instead of
// a merge loop.
// Contract: a bounded cache — each shard is cleared when it fills, so memory stays
// below roughly `capacity` entries no matter how much text passes through. Only
// words up to kMaxWordBytes are cached (long runs are rare and would crowd it).
// Thread safety: all methods may be called concurrently; 64 shards, each behind its
// own reader/writer lock, keep encode_batch threads from contending.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "aspen/tokenizer/imports.h"
#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/shared_mutex.h"

namespace aspen::tokenizer {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 64;
  static constexpr size_t kShards = 64;

  explicit WordCache(size_t capacity = 1 << 18) : shard_capacity_(capacity / kShards + 1) {}

  // Appends the cached ids of `word` to `out` and returns true, or returns false.
  bool lookup(std::string_view word, std::vector<TokenId>& out) const;
  void insert(std::string_view word, const TokenId* ids, size_t count);

 private:
  struct Shard {
    SharedMutex mutex;
    std::unordered_map<std::string, std::vector<TokenId>> entries GUARDED_BY(mutex);
  };
  Shard& shard_for(std::string_view word) const;

  size_t shard_capacity_;
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace aspen::tokenizer
