// A bounded, thread-safe map from a pre-token to its BPE ids (HF's BPE cache). Sharded by hash so
// concurrent Encode calls rarely contend. Filling stops at `capacity` words (no eviction, like HF): the
// frequent words of a corpus arrive early. Only short words are cached (`max_word_bytes`).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace zerofit::text {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 64;
  explicit WordCache(size_t capacity);

  // Appends the cached ids of `word` to `ids` and returns true on a hit.
  bool Lookup(std::string_view word, std::vector<int32_t>* ids) const;
  // Remembers `ids` for `word` unless the word is too long or the shard is full.
  void Insert(std::string_view word, const int32_t* ids, size_t count) const;

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    std::mutex mu;
    absl::flat_hash_map<std::string, std::vector<int32_t>> words;  // guarded by mu
  };
  Shard& ShardFor(std::string_view word) const;

  size_t shard_capacity_;
  std::unique_ptr<Shard[]> shards_;  // mutable state behind a const interface: a cache, guarded per shard
};

}  // namespace zerofit::text
