#include "sharding/shard_layout.h"

#include <gtest/gtest.h>

namespace zerofit::sharding {
namespace {

TEST(ShardLayoutTest, PadsOddSizesToEqualAlignedShards) {
  // 10 elements, 3 ranks, alignment 4: padded to 12, shards of 4.
  for (int r = 0; r < 3; ++r) {
    auto l = ShardLayout::Make(10, 3, r, 4);
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(l->padded_numel, 12u);
    EXPECT_EQ(l->shard_numel, 4u);
    EXPECT_EQ(l->shard_offset, 4u * r);
    EXPECT_EQ(l->valid_numel, r < 2 ? 4u : 2u);
    EXPECT_EQ(l->padding(), 2u);
  }
}

TEST(ShardLayoutTest, LastRanksMayOwnOnlyPadding) {
  auto l = ShardLayout::Make(3, 4, 3, 1);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->padded_numel, 4u);
  EXPECT_EQ(l->valid_numel, 0u);
  auto big = ShardLayout::Make(5, 4, 3, 16);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->padded_numel, 64u);
  EXPECT_EQ(big->shard_numel, 16u);
  EXPECT_EQ(big->valid_numel, 0u);
}

TEST(ShardLayoutTest, ValidNumelsAddUpForManyShapes) {
  for (size_t n : {1u, 2u, 7u, 63u, 64u, 65u, 1000u, 4097u}) {
    for (int w = 1; w <= 5; ++w) {
      size_t total = 0;
      for (int r = 0; r < w; ++r) {
        auto l = ShardLayout::Make(n, w, r, 8);
        ASSERT_TRUE(l.ok());
        EXPECT_EQ(l->padded_numel % (8u * w), 0u);
        EXPECT_EQ(l->shard_offset % 8u, 0u);
        EXPECT_LT(l->padded_numel - n, 8u * w);
        total += l->valid_numel;
      }
      EXPECT_EQ(total, n) << "n=" << n << " w=" << w;
    }
  }
}

TEST(ShardLayoutTest, RejectsBadArguments) {
  EXPECT_FALSE(ShardLayout::Make(10, 0, 0, 1).ok());
  EXPECT_FALSE(ShardLayout::Make(10, 2, 2, 1).ok());
  EXPECT_FALSE(ShardLayout::Make(10, 2, -1, 1).ok());
  EXPECT_FALSE(ShardLayout::Make(10, 2, 0, 0).ok());
}

}  // namespace
}  // namespace zerofit::sharding
