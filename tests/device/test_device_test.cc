// The test device's reason to exist: its random delays really reorder two streams that nothing orders,
// and an event wait really fixes that. Host only (label unit).
#include "device/test/test_device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

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

// serial_host_functions: as CUDA runs cudaLaunchHostFunc callbacks, the host functions of all streams run one
// at a time on one thread that is none of the streams' threads; off, each stream runs its own.
struct HostFunctionObservation {
  int max_concurrent = 0;
  std::set<std::thread::id> threads;
  uint64_t counted = 0;
};

HostFunctionObservation ObserveHostFunctions(bool serial) {
  TestDeviceOptions options;
  options.max_delay = absl::Microseconds(50);
  options.serial_host_functions = serial;
  TestDevice device(options);
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(*device.CreateStream());
  std::mutex mu;
  int running = 0;
  HostFunctionObservation seen;
  const auto fn = [&]() -> absl::Status {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen.max_concurrent = std::max(seen.max_concurrent, ++running);
      seen.threads.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(std::chrono::microseconds(300));  // long enough for others to overlap
    std::lock_guard<std::mutex> lock(mu);
    --running;
    return absl::OkStatus();
  };
  for (int round = 0; round < 10; ++round) {
    for (auto& s : streams) EXPECT_TRUE(s->HostFunc(fn).ok());
  }
  for (auto& s : streams) EXPECT_TRUE(s->Synchronize(absl::Seconds(30)).ok());
  seen.counted = device.host_functions_run();
  return seen;
}

TEST(TestDeviceTest, SerialHostFunctionsRunOneAtATimeOnOneThread) {
  const HostFunctionObservation serial = ObserveHostFunctions(true);
  EXPECT_EQ(serial.max_concurrent, 1);
  EXPECT_EQ(serial.threads.size(), 1u);
  EXPECT_EQ(serial.counted, 30u);
  // The control: without the mode, three streams' host functions overlap on three threads.
  const HostFunctionObservation own = ObserveHostFunctions(false);
  EXPECT_GT(own.max_concurrent, 1);
  EXPECT_EQ(own.threads.size(), 3u);
  EXPECT_EQ(own.counted, 30u);
}

TEST(TestDeviceTest, SerialHostFunctionErrorsBreakTheirStream) {
  TestDeviceOptions options;
  options.serial_host_functions = true;
  TestDevice device(options);
  auto s = device.CreateStream();
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->HostFunc([] { return absl::DataLossError("host function failed"); }).ok());
  EXPECT_EQ((*s)->Synchronize(absl::Seconds(30)).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace zerofit::device
