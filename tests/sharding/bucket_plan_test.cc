#include "sharding/bucket_plan.h"

#include <gtest/gtest.h>

#include <set>

namespace zerofit::sharding {
namespace {

std::vector<ParamSpec> Specs() {
  return {{"embed", 100, true}, {"w1", 30, true}, {"norm", 5, false}, {"w2", 30, true}, {"head", 50, true}};
}

TEST(BucketPlanTest, GroupsWholeParametersInBackwardOrder) {
  BucketPlanOptions o;
  o.bucket_bytes = 64 * 4;  // 64 fp32 elements
  o.alignment = 4;
  auto plan = BucketPlan::Make(Specs(), o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const auto& b = plan->buckets();
  // Backward order: head(50) | w2(30), norm(5) -> 32+5 at offset 32: 37 <= 64 ; w1 would end at 40+30=70 > 64
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].params, std::vector<size_t>({4}));
  EXPECT_EQ(b[1].params, std::vector<size_t>({3, 2}));
  EXPECT_EQ(b[2].params, std::vector<size_t>({1}));
  EXPECT_EQ(b[3].params, std::vector<size_t>({0}));     // larger than a bucket: a bucket of its own
  EXPECT_EQ(plan->placement(2).offset_in_bucket, 32u);  // aligned after w2's 30 elements
  EXPECT_EQ(plan->numel(), 215u);
}

TEST(BucketPlanTest, ShardSegmentsCoverEveryElementExactlyOnceAcrossRanks) {
  for (int w = 1; w <= 4; ++w) {
    std::set<std::pair<size_t, size_t>> covered;  // (param, element)
    size_t shard_numel = 0;
    for (int r = 0; r < w; ++r) {
      BucketPlanOptions o;
      o.bucket_bytes = 40 * 4;
      o.alignment = 4;
      o.world = w;
      o.rank = r;
      auto plan = BucketPlan::Make(Specs(), o);
      ASSERT_TRUE(plan.ok());
      if (r == 0) shard_numel = plan->shard_numel();
      EXPECT_EQ(plan->shard_numel(), shard_numel) << "all ranks own equal shards";
      EXPECT_EQ(plan->shard_numel() * w, plan->flat_numel());
      for (const ShardSegment& s : plan->segments()) {
        EXPECT_LE(s.shard_offset + s.numel, plan->shard_numel());
        const ParamPlacement& p = plan->placement(s.param);
        EXPECT_EQ(s.flat_offset, p.flat_offset + s.offset_in_param);
        for (size_t k = 0; k < s.numel; ++k) {
          EXPECT_TRUE(covered.insert({s.param, s.offset_in_param + k}).second);
        }
      }
    }
    EXPECT_EQ(covered.size(), 215u) << "world " << w;
  }
}

TEST(BucketPlanTest, MembershipDoesNotDependOnWorldSize) {
  BucketPlanOptions o;
  o.bucket_bytes = 48 * 4;
  o.alignment = 4;
  auto one = BucketPlan::Make(Specs(), o);
  o.world = 3;
  auto three = BucketPlan::Make(Specs(), o);
  ASSERT_TRUE(one.ok() && three.ok());
  ASSERT_EQ(one->buckets().size(), three->buckets().size());
  for (size_t b = 0; b < one->buckets().size(); ++b) {
    EXPECT_EQ(one->buckets()[b].params, three->buckets()[b].params);
  }
}

TEST(BucketPlanTest, RejectsEmptyModelsAndEmptyParameters) {
  EXPECT_FALSE(BucketPlan::Make({}, {}).ok());
  auto bad = BucketPlan::Make({{"x", 0, true}}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x'"), std::string::npos);
}

}  // namespace
}  // namespace zerofit::sharding
