// The test device's reason to exist: its random delays really reorder two streams that nothing orders,
// and an event wait really fixes that. Host only (label unit).
#include "device/test/test_device.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>

namespace zerofit::device {
namespace {

constexpr int kTrials = 200;

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's runtime: marks one buffer's unsynchronised accesses as intended.
extern "C" void AnnotateBenignRaceSized(const char* file, int line, const volatile void* mem, long size,
                                        const char* description);
#endif
// The race that MissingEventWaitReadsStaleData provokes on purpose (two streams, one buffer, no event): a
// TSan build reports it otherwise, and the test exists to show that it happens.
void IntendedRace(const void* mem, size_t bytes) {
#if defined(__SANITIZE_THREAD__)
  AnnotateBenignRaceSized(__FILE__, __LINE__, mem, static_cast<long>(bytes),
                          "stream a writes, stream b reads, no event orders them");
#endif
}

// Each trial enqueues "a" on stream a, then "b" on stream b; returns how many trials ran b first.
int CountReorderings(bool order_with_event) {
  TestDeviceOptions options;
  options.seed = 42;
  options.max_delay = absl::Microseconds(500);
  TestDevice device(options);
  auto a = device.CreateStream();
  auto b = device.CreateStream();
  auto event = device.CreateEvent();
  EXPECT_TRUE(a.ok() && b.ok() && event.ok());
  std::mutex mu;
  std::string log;
  const auto append = [&](char c) {
    return [&, c] {
      std::lock_guard<std::mutex> lock(mu);
      log.push_back(c);
      return absl::OkStatus();
    };
  };
  int reordered = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    log.clear();
    EXPECT_TRUE((*a)->HostFunc(append('a')).ok());
    if (order_with_event) {
      EXPECT_TRUE((*event)->Record(**a).ok());
      EXPECT_TRUE((*event)->Wait(**b).ok());
    }
    EXPECT_TRUE((*b)->HostFunc(append('b')).ok());
    EXPECT_TRUE((*a)->Synchronize(absl::Seconds(30)).ok());
    EXPECT_TRUE((*b)->Synchronize(absl::Seconds(30)).ok());
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(log.size(), 2u);
    if (log == "ba") ++reordered;
  }
  return reordered;
}

TEST(TestDevice, RandomDelaysReorderUnsynchronisedStreams) {
  // Each trial is close to a coin flip; never once in 200 would mean the delays do nothing.
  EXPECT_GT(CountReorderings(/*order_with_event=*/false), 0);
}

TEST(TestDevice, AnEventWaitRestoresTheOrder) { EXPECT_EQ(CountReorderings(/*order_with_event=*/true), 0); }

// Data, not just a log: a copy that forgets to wait reads stale values at least once; with the wait, never.
TEST(TestDevice, MissingEventWaitReadsStaleData) {
  TestDevice device(TestDeviceOptions{7, absl::Microseconds(500), absl::Seconds(30)});
  auto a = device.CreateStream();
  auto b = device.CreateStream();
  auto event = device.CreateEvent();
  // A source buffer per half, both alive throughout (an annotation covers an address): with the wait, TSan
  // must still see every access to the source ordered by the event.
  auto racy_src = device.Allocate(sizeof(float), MemoryKind::kDevice);
  auto ordered_src = device.Allocate(sizeof(float), MemoryKind::kDevice);
  auto dst = device.Allocate(sizeof(float), MemoryKind::kDevice);
  ASSERT_TRUE(a.ok() && b.ok() && event.ok() && racy_src.ok() && ordered_src.ok() && dst.ok());
  IntendedRace(racy_src->data(), sizeof(float));
  const float one = 1.0f;
  for (bool wait : {false, true}) {
    Buffer* src = wait ? &*ordered_src : &*racy_src;
    int stale = 0;
    for (int trial = 0; trial < kTrials; ++trial) {
      ASSERT_TRUE((*a)->Fill(src->data(), 0, sizeof(float)).ok());
      ASSERT_TRUE((*a)->Copy(src->data(), &one, sizeof(float)).ok());
      if (wait) {
        ASSERT_TRUE((*event)->Record(**a).ok());
        ASSERT_TRUE((*event)->Wait(**b).ok());
      }
      ASSERT_TRUE((*b)->Copy(dst->data(), src->data(), sizeof(float)).ok());
      ASSERT_TRUE((*a)->Synchronize(absl::Seconds(30)).ok());
      ASSERT_TRUE((*b)->Synchronize(absl::Seconds(30)).ok());
      if (*dst->as<float>() != 1.0f) ++stale;
    }
    if (wait) {
      EXPECT_EQ(stale, 0);
    } else {
      EXPECT_GT(stale, 0);
    }
  }
}

}  // namespace
}  // namespace zerofit::device
