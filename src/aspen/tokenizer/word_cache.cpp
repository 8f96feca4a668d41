#include "aspen/tokenizer/word_cache.h"

#include <functional>

#include "aspen/tokenizer/imports.h"

namespace aspen::tokenizer {

WordCache::Shard& WordCache::shard_for(std::string_view word) const {
  // The map hashes the key again; mixing the high bits here keeps the two uses of the
  // same hash from correlating (low bits pick the bucket inside the shard).
  const size_t h = std::hash<std::string_view>{}(word);
  return shards_[(h >> 17) % kShards];
}

bool WordCache::lookup(std::string_view word, std::vector<TokenId>& out) const {
  if (word.size() > kMaxWordBytes) return false;
  Shard& shard = shard_for(word);
  // A std::string key for the lookup stays in the small-string buffer for most words.
  const std::string key(word);
  ReaderMutexLock lock(shard.mutex);
  const auto it = shard.entries.find(key);
  if (it == shard.entries.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view word, const TokenId* ids, size_t count) {
  if (word.size() > kMaxWordBytes) return;
  Shard& shard = shard_for(word);
  WriterMutexLock lock(shard.mutex);
  if (shard.entries.size() >= shard_capacity_) shard.entries.clear();
  shard.entries.emplace(std::string(word), std::vector<TokenId>(ids, ids + count));
}

}  // namespace aspen::tokenizer
