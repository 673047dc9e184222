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

}  // namespace
}  // namespace zerofit::core
