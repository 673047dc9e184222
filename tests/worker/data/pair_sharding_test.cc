#include "worker/data/pair_sharding.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"
#include "worker/data/pair_batch.h"
#include "worker/data/preference_dataset.h"

namespace zerofit::data {
namespace {

TEST(PairShardingTest, ConcreteSplit) {
  const std::vector<uint64_t> batch = {40, 41, 42, 43, 44, 45, 46};  // 7 pairs over 3 ranks: 3, 2, 2
  auto r0 = ShardPairs(batch, 0, 3, 2);
  auto r1 = ShardPairs(batch, 1, 3, 2);
  auto r2 = ShardPairs(batch, 2, 3, 2);
  ASSERT_TRUE(r0.ok() && r1.ok() && r2.ok());
  EXPECT_EQ(*r0, (std::vector<std::vector<uint64_t>>{{40, 41}, {42}}));
  EXPECT_EQ(*r1, (std::vector<std::vector<uint64_t>>{{43}, {44}}));
  EXPECT_EQ(*r2, (std::vector<std::vector<uint64_t>>{{45}, {46}}));
}

TEST(PairShardingTest, CoversEveryPairOnceEvenlyForManyShapes) {
  for (uint64_t b = 0; b <= 21; ++b) {
    std::vector<uint64_t> batch(b);
    std::iota(batch.begin(), batch.end(), uint64_t{100});
    for (int world = 1; world <= 5; ++world) {
      for (int micro = 1; micro <= 4; ++micro) {
        std::vector<uint64_t> all;
        size_t min_rank = SIZE_MAX, max_rank = 0;
        for (int rank = 0; rank < world; ++rank) {
          auto shard = ShardPairs(batch, rank, world, micro);
          ASSERT_TRUE(shard.ok()) << shard.status();
          ASSERT_EQ(shard->size(), static_cast<size_t>(micro));
          size_t rank_total = 0, min_mb = SIZE_MAX, max_mb = 0;
          for (const auto& mb : *shard) {
            all.insert(all.end(), mb.begin(), mb.end());
            rank_total += mb.size();
            min_mb = std::min(min_mb, mb.size());
            max_mb = std::max(max_mb, mb.size());
          }
          EXPECT_LE(max_mb - min_mb, 1u) << "b=" << b << " world=" << world << " micro=" << micro;
          min_rank = std::min(min_rank, rank_total);
          max_rank = std::max(max_rank, rank_total);
        }
        EXPECT_LE(max_rank - min_rank, 1u) << "b=" << b << " world=" << world;
        EXPECT_EQ(all, batch) << "every pair exactly once, in order; b=" << b << " world=" << world;
      }
    }
  }
}

// A pair is never split: whatever rank and micro-batch it lands in, its chosen and rejected rows are built
// together (row b and row B + b of the same PairBatch come from the same pair).
TEST(PairShardingTest, NeverSplitsAPair) {
  std::vector<PreferencePair> pairs;
  for (size_t i = 0; i < 9; ++i) {
    pairs.push_back(
        PreferencePair{{2, 10}, {static_cast<int32_t>(20 + i), 3}, {static_cast<int32_t>(60 + i)}, i + 1});
  }
  std::vector<uint64_t> batch = {8, 3, 5, 0, 1, 7, 2, 6, 4};
  for (int rank = 0; rank < 4; ++rank) {
    auto shard = ShardPairs(batch, rank, 4, 2);
    ASSERT_TRUE(shard.ok());
    for (const auto& mb : *shard) {
      auto pb = MakePairBatch(pairs, mb, 0);
      ASSERT_TRUE(pb.ok()) << pb.status();
      for (int64_t b = 0; b < pb->num_pairs; ++b) {
        const int32_t chosen_tok = pb->tokens[pb->row_offset(b) + 2];
        const int32_t rejected_tok = pb->tokens[pb->row_offset(pb->num_pairs + b) + 2];
        EXPECT_EQ(chosen_tok - 20, rejected_tok - 60);
        EXPECT_EQ(static_cast<uint64_t>(chosen_tok - 20), mb[b]);
      }
    }
  }
}

TEST(PairShardingTest, FewerPairsThanMicroBatchesLeavesTrailingOnesEmpty) {
  auto shard = ShardPairs({5, 6}, 0, 1, 4);
  ASSERT_TRUE(shard.ok());
  EXPECT_EQ(*shard, (std::vector<std::vector<uint64_t>>{{5}, {6}, {}, {}}));
}

TEST(PairShardingTest, RejectsBadArguments) {
  EXPECT_FALSE(ShardPairs({1}, 0, 0, 1).ok());
  EXPECT_FALSE(ShardPairs({1}, 2, 2, 1).ok());
  EXPECT_FALSE(ShardPairs({1}, -1, 2, 1).ok());
  auto micro = ShardPairs({1}, 0, 1, 0);
  ASSERT_FALSE(micro.ok());
  EXPECT_NE(micro.status().message().find("micro_batches must be >= 1"), std::string::npos);
}

}  // namespace
}  // namespace zerofit::data
