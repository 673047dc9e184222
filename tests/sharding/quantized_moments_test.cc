// QuantizedMoments (sharding/quantized_moments.h) on the host device: a plan whose segments are not on block
// boundaries is refused by name; the host copies dequantise within half a code gap, give each block its own
// absmax when restored without scales and the codes back exactly when restored with the saved ones; the
// small parameters' moments stay fp32 bit for bit; and the engine refuses 8-bit moments with offload.
#include "sharding/quantized_moments.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "comm/communicator_factory.h"
#include "device/host/host_device.h"
#include "sharding/zero2_optimizer.h"

namespace zerofit::sharding {
namespace {

std::vector<ParamSpec> QuantSpecs() { return {{"embed", 1000, true}, {"norm", 40, false}, {"w", 600, true}}; }

BucketPlan QuantPlan(size_t alignment) {
  BucketPlanOptions o;
  o.bucket_bytes = 4096;
  o.alignment = alignment;
  auto plan = BucketPlan::Make(QuantSpecs(), o);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

TEST(QuantizedMomentsTest, RefusesSegmentsOffBlockBoundaries) {
  const BucketPlan plan = QuantPlan(16);
  device::HostDevice host;
  auto stream = host.CreateStream();
  ASSERT_TRUE(stream.ok());
  auto q = QuantizedMoments::Create(&plan, &host, stream->get(), 100, absl::Seconds(10));
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("parameter '"), std::string::npos) << q.status();
  EXPECT_NE(q.status().message().find("multiple of 256"), std::string::npos) << q.status();
}

TEST(QuantizedMomentsTest, HostCopiesRestoreTheCodesWithTheirScales) {
  const BucketPlan plan = QuantPlan(256);
  device::HostDevice host;
  auto stream = host.CreateStream();
  ASSERT_TRUE(stream.ok());
  // min_8bit_size 100: embed and w 8-bit, norm fp32.
  auto q = QuantizedMoments::Create(&plan, &host, stream->get(), 100, absl::Seconds(10));
  ASSERT_TRUE(q.ok()) << q.status();
  const size_t n = plan.shard_numel();
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const ShardSegment& s : plan.segments()) {
    for (size_t i = 0; i < s.numel; ++i) {
      m[s.shard_offset + i] = 1e-3f * normal(rng);
      v[s.shard_offset + i] = 1e-6f * normal(rng) * normal(rng);
      v[s.shard_offset + i] = std::fabs(v[s.shard_offset + i]);
    }
  }
  ASSERT_TRUE((*q)->CopyFromHost(m.data(), v.data(), nullptr, nullptr).ok());
  std::vector<float> m1(n), v1(n), ms(n / 256), vs(n / 256);
  ASSERT_TRUE((*q)->CopyToHost(m1.data(), v1.data(), ms.data(), vs.data()).ok());
  for (const ShardSegment& s : plan.segments()) {
    const bool small = QuantSpecs()[s.param].numel < 100;
    for (size_t i = 0; i < s.numel; ++i) {
      const size_t at = s.shard_offset + i, b = at / 256;
      if (small) {
        ASSERT_EQ(m1[at], m[at]) << "fp32 moments stay exact";
        ASSERT_EQ(v1[at], v[at]);
        ASSERT_EQ(ms[b], 0.0f) << "no scale for fp32 moments";
        continue;
      }
      // Within the widest half-gap of the maps (the signed map's top decade: 0.9/64/2 of the scale, and
      // its missing -1: 0.0071 of it).
      ASSERT_LE(std::fabs(m1[at] - m[at]), 0.0072f * ms[b]) << at;
      ASSERT_LE(std::fabs(v1[at] - v[at]), 0.0036f * vs[b]) << at;
      ASSERT_GT(ms[b], 0.0f);
    }
  }
  // Restored against the saved scales: the same codes, so the same dequantised moments and scales.
  ASSERT_TRUE((*q)->CopyFromHost(m1.data(), v1.data(), ms.data(), vs.data()).ok());
  std::vector<float> m2(n), v2(n), ms2(n / 256), vs2(n / 256);
  ASSERT_TRUE((*q)->CopyToHost(m2.data(), v2.data(), ms2.data(), vs2.data()).ok());
  EXPECT_EQ(m2, m1);
  EXPECT_EQ(v2, v1);
  EXPECT_EQ(ms2, ms);
  EXPECT_EQ(vs2, vs);
  EXPECT_GT((*q)->bytes(), 2 * n);
  EXPECT_EQ((*q)->quantized_numel(), 1600u);
}

}  // namespace
}  // namespace zerofit::sharding
