// The step scheduler: every sample exactly once per epoch, balanced tokens, similar lengths per micro-batch,
// and resumable at any step with any world size.
#include "jobspec/step_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace zerofit::jobspec {
namespace {

std::vector<int64_t> Lengths(size_t n) {
  std::mt19937 gen(3);
  std::vector<int64_t> l(n);
  for (auto& x : l) x = 20 + static_cast<int64_t>(gen() % 500);
  return l;
}

TEST(StepSchedulerTest, EverySampleExactlyOncePerEpochIncludingAShortLastStep) {
  const auto lengths = Lengths(1003);  // not a multiple of the global batch
  SchedulerOptions o;
  o.global_batch = 64;
  o.world_size = 3;
  o.gradient_accumulation = 2;
  auto s = StepScheduler::Create(lengths, o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->steps_per_epoch(), 16);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int> seen(lengths.size(), 0);
    for (int64_t k = 0; k < s->steps_per_epoch(); ++k) {
      const StepAssignment a = s->Assign(epoch * s->steps_per_epoch() + k);
      EXPECT_EQ(a.epoch, epoch);
      ASSERT_EQ(a.ranks.size(), 3u);
      for (const auto& rank : a.ranks) {
        ASSERT_EQ(rank.size(), 2u);
        for (const auto& micro : rank)
          for (uint64_t i : micro) ++seen[i];
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "sample " << i << " epoch " << epoch;
  }
  // Epochs are shuffled differently.
  EXPECT_NE(s->Assign(0).ranks[0][0], s->Assign(s->steps_per_epoch()).ranks[0][0]);
}

TEST(StepSchedulerTest, TokensAreBalancedAndMicroBatchesPackSimilarLengths) {
  const auto lengths = Lengths(4096);
  SchedulerOptions o;
  o.global_batch = 256;
  o.world_size = 4;
  o.gradient_accumulation = 4;
  auto s = StepScheduler::Create(lengths, o);
  ASSERT_TRUE(s.ok());
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  for (int64_t k = 0; k < 8; ++k) {
    const StepAssignment a = s->Assign(k);
    const auto [lo, hi] = std::minmax_element(a.rank_tokens.begin(), a.rank_tokens.end());
    EXPECT_LE(*hi - *lo, longest) << "step " << k;  // LPT: within one sample's length
    for (const auto& rank : a.ranks) {
      for (size_t m = 0; m + 1 < rank.size(); ++m) {
        // Sorted by length across the rank's micro-batches: no overlap of length ranges.
        EXPECT_LE(lengths[rank[m].back()], lengths[rank[m + 1].front()]);
      }
    }
  }
}

TEST(StepSchedulerTest, ARestartResumesWithoutRepeatsOrGapsEvenOnAnotherWorldSize) {
  const auto lengths = Lengths(500);
  SchedulerOptions before;
  before.global_batch = 32;
  before.world_size = 4;
  before.gradient_accumulation = 1;
  SchedulerOptions after = before;
  after.world_size = 2;  // re-planned: fewer ranks, more accumulation
  after.gradient_accumulation = 2;
  auto a = StepScheduler::Create(lengths, before);
  auto b = StepScheduler::Create(lengths, after);
  ASSERT_TRUE(a.ok() && b.ok());
  const int64_t checkpoint = 6;  // steps 0..6 done before the crash
  std::vector<int> seen(lengths.size(), 0);
  auto take = [&](const StepAssignment& x) {
    for (const auto& rank : x.ranks)
      for (const auto& micro : rank)
        for (uint64_t i : micro) ++seen[i];
  };
  for (int64_t k = 0; k <= checkpoint; ++k) take(a->Assign(k));
  for (int64_t k = checkpoint + 1; k < b->steps_per_epoch(); ++k) take(b->Assign(k));
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "sample " << i;
  // The same step holds the same samples whatever the world size.
  std::set<uint64_t> x, y;
  for (const auto& r : a->Assign(9).ranks)
    for (const auto& m : r) x.insert(m.begin(), m.end());
  for (const auto& r : b->Assign(9).ranks)
    for (const auto& m : r) y.insert(m.begin(), m.end());
  EXPECT_EQ(x, y);
}

TEST(StepSchedulerTest, RefusesBadInput) {
  EXPECT_FALSE(StepScheduler::Create({}, SchedulerOptions{}).ok());
  EXPECT_FALSE(StepScheduler::Create({5, 0, 3}, SchedulerOptions{}).ok());
  SchedulerOptions o;
  o.world_size = 0;
  EXPECT_FALSE(StepScheduler::Create({5}, o).ok());
}

}  // namespace
}  // namespace zerofit::jobspec
