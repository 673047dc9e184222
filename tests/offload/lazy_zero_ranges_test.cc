// LazyZeroRanges (offload/lazy_zero_ranges.h): which parts of a buffer are zero in meaning only.
#include "offload/lazy_zero_ranges.h"

#include <gtest/gtest.h>

#include <vector>

namespace zerofit::offload {
namespace {

using Ranges = std::vector<LazyZeroRanges::Range>;

TEST(LazyZeroRangesTest, ReceivesThatTileTheBufferTakeItWhole) {
  LazyZeroRanges z(10);
  EXPECT_TRUE(z.Take(0, 3));
  EXPECT_TRUE(z.Take(7, 10));
  EXPECT_FALSE(z.Take(2, 5)) << "[2, 3) is no longer pending";
  EXPECT_TRUE(z.Take(3, 7));
  EXPECT_TRUE(z.empty());
  EXPECT_FALSE(z.Take(0, 3)) << "a second receive adds";
  z.MarkAll();
  EXPECT_EQ(z.TakeAll(), (Ranges{{0, 10}}));
  EXPECT_TRUE(z.empty());
}

TEST(LazyZeroRangesTest, WhatNoReceiveCoveredIsLeftToZero) {
  LazyZeroRanges z(10);
  EXPECT_TRUE(z.Take(2, 4));
  EXPECT_TRUE(z.Take(6, 7));
  EXPECT_EQ(z.TakeAll(), (Ranges{{0, 2}, {4, 6}, {7, 10}}));
  LazyZeroRanges empty(0);
  EXPECT_TRUE(empty.empty());
  EXPECT_TRUE(empty.Take(0, 0));
}

TEST(LazyZeroRangesTest, APartlyPendingReceiveTakesOnlyItsPendingParts) {
  LazyZeroRanges z(10);
  EXPECT_TRUE(z.Take(3, 5));
  // [2, 8) overlaps [0, 3) and [5, 10): their parts inside it are taken, the rest stays pending.
  EXPECT_EQ(z.TakeOverlapping(2, 8), (Ranges{{2, 3}, {5, 8}}));
  EXPECT_EQ(z.TakeOverlapping(2, 8), Ranges{});
  EXPECT_EQ(z.TakeAll(), (Ranges{{0, 2}, {8, 10}}));
  z.MarkAll();
  EXPECT_EQ(z.TakeOverlapping(4, 6), (Ranges{{4, 6}}));
  EXPECT_TRUE(z.Take(0, 4));
  EXPECT_TRUE(z.Take(6, 10));
  EXPECT_TRUE(z.empty());
}

}  // namespace
}  // namespace zerofit::offload
