// The device clock of a step's stages (sharding/device_timeline.h), on the test device, whose streams run
// their work later than the host enqueues it, as a GPU's do: the device times must be when the stream ran
// each stage, not when the host launched it.
#include "sharding/device_timeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "device/host/host_device.h"
#include "device/test/test_device.h"
#include "sharding/step_profile.h"

namespace zerofit::sharding {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(60);

// Work of `ms` milliseconds on the stream (a host function that sleeps).
void Busy(device::Stream& stream, int ms) {
  ASSERT_TRUE(stream
                  .HostFunc([ms] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
                    return absl::OkStatus();
                  })
                  .ok());
}

// Holds the stream until Release(), so that a test knows which markings cannot have run yet.
class Gate {
 public:
  void Hold(device::Stream& stream) {
    ASSERT_TRUE(stream
                    .HostFunc([this] {
                      const absl::Time deadline = absl::Now() + kDeadline;
                      while (!open_.load() && absl::Now() < deadline) {
                        std::this_thread::sleep_for(std::chrono::milliseconds(1));
                      }
                      return absl::OkStatus();
                    })
                    .ok());
  }
  void Release() { open_ = true; }

 private:
  std::atomic<bool> open_{false};
};

double StageMs(const DeviceStepTimes& t, DeviceStage s) { return t.stage_ms[static_cast<size_t>(s)]; }

// A timeline on the test device's compute stream; each test leaves the stream drained.
class DeviceTimelineTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_TRUE(stream.Synchronize(kDeadline).ok()); }

  device::TestDevice dev;
  device::Stream& stream = dev.compute_stream();
  DeviceTimeline timeline{&dev, &stream};
};

TEST_F(DeviceTimelineTest, TimesAreWhenTheStreamRanTheStagesNotWhenTheHostLaunchedThem) {
  StepProfile profile;
  profile.set_device_timeline(&timeline);
  Gate gate;
  profile.BeginStep();
  {
    ScopedStage forward(&profile, Stage::kForward);
    gate.Hold(stream);
    Busy(stream, 30);
  }
  {
    ScopedStage backward(&profile, Stage::kBackward);
    Busy(stream, 50);
  }
  {
    ScopedDeviceStage update(&timeline, DeviceStage::kUpdate);
    Busy(stream, 10);
  }
  const StepBreakdown first = profile.EndStep();
  EXPECT_FALSE(first.device.has_value()) << "the stream is held: none of the step's markings has run";
  // The host only enqueued: its forward and backward took far less than the device's 30 and 50 ms.
  EXPECT_LT(first.busy_ms[static_cast<size_t>(Stage::kForward)], 30.0);
  EXPECT_LT(first.busy_ms[static_cast<size_t>(Stage::kBackward)], 50.0);

  gate.Release();
  ASSERT_TRUE(stream.Synchronize(kDeadline).ok());
  Gate second;
  second.Hold(stream);  // the second step's end marking has not run when it ends: only step 1 is ready
  const StepBreakdown b = profile.EndStep();
  second.Release();
  ASSERT_TRUE(b.device.has_value()) << timeline.status();
  const DeviceStepTimes& t = *b.device;
  EXPECT_EQ(t.step, 1);
  EXPECT_GE(StageMs(t, DeviceStage::kForward), 29.5);  // 0.5 ms for the clock's grain
  EXPECT_GE(StageMs(t, DeviceStage::kBackward), 49.5);
  EXPECT_GE(StageMs(t, DeviceStage::kUpdate), 9.5);
  const double staged = StageMs(t, DeviceStage::kForward) + StageMs(t, DeviceStage::kBackward) +
                        StageMs(t, DeviceStage::kUpdate);
  EXPECT_NEAR(t.step_ms, staged + t.gap_ms, 1e-9);
  EXPECT_GE(t.gap_ms, 0.0);
  EXPECT_TRUE(timeline.status().ok());
  EXPECT_EQ(timeline.dropped(), 0);
  EXPECT_NE(t.ToString().find("device step 1:"), std::string::npos) << t.ToString();
  ASSERT_TRUE(stream.Synchronize(kDeadline).ok());
}

TEST_F(DeviceTimelineTest, MicroBatchesAddUpAndTheGapIsTheStreamBetweenStages) {
  Gate first;
  for (int k = 0; k < 3; ++k) {
    ScopedDeviceStage forward(&timeline, DeviceStage::kForward);
    if (k == 0) first.Hold(stream);
    Busy(stream, 5);
  }
  Busy(stream, 40);  // outside every stage: the gap
  EXPECT_FALSE(timeline.EndStep().has_value());
  first.Release();
  ASSERT_TRUE(stream.Synchronize(kDeadline).ok());
  Gate second;
  second.Hold(stream);
  const std::optional<DeviceStepTimes> t = timeline.EndStep();
  second.Release();
  ASSERT_TRUE(t.has_value()) << timeline.status();
  EXPECT_EQ(t->step, 1);
  EXPECT_GE(StageMs(*t, DeviceStage::kForward), 3 * 5 - 1.5);
  EXPECT_EQ(StageMs(*t, DeviceStage::kBackward), 0.0);
  EXPECT_GE(t->gap_ms, 39.5);
  ASSERT_TRUE(stream.Synchronize(kDeadline).ok());
}

// Steps whose markings have not run when their slot is needed again are given up, counted, and the
// timeline goes on with the steps after them.
TEST_F(DeviceTimelineTest, StepsThatHaveNotRunWhenTheirSlotIsNeededAreDropped) {
  Gate gate;
  gate.Hold(stream);
  for (int step = 1; step <= 4; ++step) {
    ScopedDeviceStage backward(&timeline, DeviceStage::kBackward);
    Busy(stream, 1);
    ASSERT_FALSE(timeline.EndStep().has_value()) << "step " << step;
  }
  EXPECT_EQ(timeline.dropped(), 2) << "three slots: steps 1 and 2 gave theirs to steps 4 and 5";
  gate.Release();
  ASSERT_TRUE(stream.Synchronize(kDeadline).ok());
  const std::optional<DeviceStepTimes> t = timeline.EndStep();
  ASSERT_TRUE(t.has_value()) << timeline.status();
  EXPECT_GE(t->step, 4);
  EXPECT_TRUE(timeline.status().ok());
  ASSERT_TRUE(stream.Synchronize(kDeadline).ok());
}

// On the host device work runs as it is enqueued: the device clock is the host's.
TEST(DeviceTimelineOnTheHostTest, EveryStepIsReadyAtOnce) {
  device::HostDevice dev;
  DeviceTimeline timeline(&dev, &dev.compute_stream());
  {
    ScopedDeviceStage forward(&timeline, DeviceStage::kForward);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::optional<DeviceStepTimes> t = timeline.EndStep();
  ASSERT_TRUE(t.has_value()) << timeline.status();
  EXPECT_EQ(t->step, 1);
  EXPECT_GE(StageMs(*t, DeviceStage::kForward), 4.5);
  EXPECT_GE(t->step_ms, StageMs(*t, DeviceStage::kForward));
}

}  // namespace
}  // namespace zerofit::sharding
