#include "text/hf/word_cache.h"

#include "absl/hash/hash.h"
#include "text/string_view_compat.h"

namespace zerofit::text {

WordCache::WordCache(size_t capacity)
    : shard_capacity_((capacity + kShards - 1) / kShards), shards_(new Shard[kShards]) {}

WordCache::Shard& WordCache::ShardFor(std::string_view word) const {
  // The top bits pick the shard, so the map (which uses the low bits) still sees well-mixed hashes.
  const size_t h = absl::Hash<absl::string_view>()(AsAbsl(word));
  return shards_[(h >> 56) % kShards];
}

bool WordCache::Lookup(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.size() > kMaxWordBytes) return false;
  Shard& shard = ShardFor(word);
  std::lock_guard<std::mutex> lock(shard.mu);
  auto it = shard.words.find(AsAbsl(word));
  if (it == shard.words.end()) return false;
  ids->insert(ids->end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::Insert(std::string_view word, const int32_t* ids, size_t count) const {
  if (word.size() > kMaxWordBytes) return;
  Shard& shard = ShardFor(word);
  std::lock_guard<std::mutex> lock(shard.mu);
  if (shard.words.size() >= shard_capacity_) return;
  shard.words.try_emplace(std::string(word), ids, ids + count);
}

}  // namespace zerofit::text
