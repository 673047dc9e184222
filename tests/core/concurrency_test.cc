#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/serial_executor.h"
#include "core/thread_pool.h"

namespace zerofit::core {
namespace {

TEST(ThreadPoolTest, RunsEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (size_t n : {0u, 1u, 7u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      pool.ParallelFor(n, [&](size_t i) { hits[i]++; });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1);
    }
  }
}

TEST(SerialExecutorTest, RunsJobsInOrderAndDrainHasADeadline) {
  SerialExecutor ex;
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) ex.Submit([&order, i] { order.push_back(i); });
  ASSERT_TRUE(ex.Drain(absl::Seconds(5)).ok());
  EXPECT_EQ(order, std::vector<int>({0, 1, 2, 3, 4}));
  EXPECT_TRUE(ex.Idle());
  ex.Submit([] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  const absl::Status s = ex.Drain(absl::Milliseconds(20));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(ex.Drain(absl::Seconds(5)).ok());
}

TEST(SerialExecutorTest, WaitForReturnsOnceItsTicketHasRun) {
  SerialExecutor ex;
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  const uint64_t first = ex.Submit([&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ++ran;
  });
  const uint64_t second = ex.Submit([&] { ++ran; });
  EXPECT_EQ(second, first + 1);
  // The first job holds the thread: neither ticket is reached, and the wait ends at its deadline.
  EXPECT_EQ(ex.WaitFor(first, absl::Milliseconds(20)).code(), absl::StatusCode::kDeadlineExceeded);
  release = true;
  ASSERT_TRUE(ex.WaitFor(first, absl::Seconds(5)).ok());
  EXPECT_GE(ran.load(), 1);
  ASSERT_TRUE(ex.WaitFor(second, absl::Seconds(5)).ok());
  EXPECT_EQ(ran.load(), 2);
  EXPECT_TRUE(ex.WaitFor(0, absl::ZeroDuration()).ok()) << "ticket 0 (nothing submitted) is always reached";
}

}  // namespace
}  // namespace zerofit::core
