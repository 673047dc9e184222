#include "sharding/step_profile.h"

#include <gtest/gtest.h>

namespace zerofit::sharding {
namespace {

TEST(StepProfileTest, SplitsWallTimeIntoBusyIdleAndOverlap) {
  StepProfile p;
  const absl::Time t0 = absl::FromUnixMillis(1000);
  auto at = [&](int ms) { return t0 + absl::Milliseconds(ms); };
  p.BeginStep(t0);
  p.Record(Stage::kBackward, at(0), at(50));
  p.Record(Stage::kReduceScatter, at(30), at(60));  // overlaps compute by 20 ms
  p.Record(Stage::kCpuAdamW, at(70), at(90));
  p.Record(Stage::kAllGather, at(80), at(120));  // overlaps AdamW by 10 ms, runs past the window end
  const StepBreakdown b = p.EndStep(at(100));
  EXPECT_DOUBLE_EQ(b.wall_ms, 100);
  EXPECT_DOUBLE_EQ(b.busy_ms[static_cast<size_t>(Stage::kBackward)], 50);
  EXPECT_DOUBLE_EQ(b.busy_ms[static_cast<size_t>(Stage::kReduceScatter)], 30);
  EXPECT_DOUBLE_EQ(b.busy_ms[static_cast<size_t>(Stage::kAllGather)], 20);  // clipped to the window
  EXPECT_DOUBLE_EQ(b.idle_ms, 10);                                          // 60..70
  EXPECT_DOUBLE_EQ(b.overlap_ms, 30);                                       // 20 + 10
  EXPECT_NE(b.ToString().find("idle 10.0"), std::string::npos) << b.ToString();
  // The next window starts where this one ended.
  p.Record(Stage::kH2D, at(100), at(110));
  const StepBreakdown next = p.EndStep(at(110));
  EXPECT_DOUBLE_EQ(next.wall_ms, 10);
  EXPECT_DOUBLE_EQ(next.idle_ms, 0);
}

}  // namespace
}  // namespace zerofit::sharding
