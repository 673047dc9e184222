// RangeSet (offload/range_set.h): which parts of a buffer hold in meaning what they do not in memory.
#include "offload/range_set.h"

#include <gtest/gtest.h>

#include <vector>

namespace zerofit::offload {
namespace {

using Ranges = std::vector<RangeSet::Range>;

TEST(RangeSetTest, ReceivesThatTileTheBufferTakeItWhole) {
  RangeSet z(10);
  z.MarkAll();
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

TEST(RangeSetTest, WhatNoReceiveCoveredIsLeftToZero) {
  RangeSet z(10);
  z.MarkAll();
  EXPECT_TRUE(z.Take(2, 4));
  EXPECT_TRUE(z.Take(6, 7));
  EXPECT_EQ(z.TakeAll(), (Ranges{{0, 2}, {4, 6}, {7, 10}}));
  RangeSet empty(0);
  empty.MarkAll();
  EXPECT_TRUE(empty.empty());
  EXPECT_TRUE(empty.Take(0, 0));
}

TEST(RangeSetTest, APartlyPendingReceiveTakesOnlyItsPendingParts) {
  RangeSet z(10);
  z.MarkAll();
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

// The staging set: receives add their ranges (adjacent ones merge), a second receive or a read looks them up.
TEST(RangeSetTest, AddedRangesMergeAndAreLookedUpWithoutLeaving) {
  RangeSet s(20);
  EXPECT_TRUE(s.empty());
  s.Add(4, 8);
  s.Add(12, 16);
  s.Add(8, 10);   // merges with [4, 8)
  s.Add(10, 12);  // joins [4, 10) and [12, 16)
  s.Add(0, 0);
  EXPECT_EQ(s.Overlapping(0, 20), (Ranges{{4, 16}}));
  EXPECT_EQ(s.Overlapping(2, 6), (Ranges{{4, 6}}));
  EXPECT_EQ(s.Overlapping(16, 20), Ranges{});
  s.Add(18, 20);
  s.Add(0, 2);
  EXPECT_EQ(s.Overlapping(1, 19), (Ranges{{1, 2}, {4, 16}, {18, 19}}));
  EXPECT_EQ(s.TakeOverlapping(6, 8), (Ranges{{6, 8}}));
  EXPECT_EQ(s.Overlapping(0, 20), (Ranges{{0, 2}, {4, 6}, {8, 16}, {18, 20}}));
  s.Add(6, 8);
  EXPECT_EQ(s.Overlapping(0, 20), (Ranges{{0, 2}, {4, 16}, {18, 20}}));
  s.Clear();
  EXPECT_TRUE(s.empty());
}

}  // namespace
}  // namespace zerofit::offload
