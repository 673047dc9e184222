// core/cpu_affinity.h: the affinity mask a launcher sets is what AllowedCpus() reports (a thread bound to
// one CPU sees 1, as a rank that mpiexec bound to one core does), and a thread count beyond it is refused
// with the numbers and the launcher flags that fix it.
#include "core/cpu_affinity.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <thread>

namespace zerofit::core {
namespace {

TEST(CpuAffinityTest, AllowedCpusFollowsTheAffinityMask) {
  const int all = AllowedCpus();
  EXPECT_GE(all, 1);
  EXPECT_LE(all, std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
  // On a thread of its own (a new thread inherits its creator's mask, as the offload pool's threads do):
  // bound to the first CPU it may use, it sees exactly one.
  int seen = 0;
  std::thread bound([&] {
    cpu_set_t mask;
    ASSERT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
    int first = 0;
    while (!CPU_ISSET(first, &mask)) ++first;
    CPU_ZERO(&mask);
    CPU_SET(first, &mask);
    ASSERT_EQ(sched_setaffinity(0, sizeof(mask), &mask), 0);
    int inherited = 0;
    std::thread child([&] { inherited = AllowedCpus(); });
    child.join();
    seen = AllowedCpus();
    EXPECT_EQ(inherited, 1);
  });
  bound.join();
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(AllowedCpus(), all) << "the test's own thread keeps its mask";
  // A thread count of 0 means the CPUs of the mask; any other is taken as given.
  EXPECT_EQ(ThreadsOrAllowedCpus(0), all);
  EXPECT_EQ(ThreadsOrAllowedCpus(3), 3);
}

TEST(CpuAffinityTest, ThreadsBeyondTheCpusAreRefusedWithTheFix) {
  EXPECT_TRUE(CheckThreadsFitCpus("CPU AdamW", 4, 4).ok());
  EXPECT_TRUE(CheckThreadsFitCpus("CPU AdamW", 1, 16).ok());
  const absl::Status s = CheckThreadsFitCpus("CPU AdamW", 16, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  for (const char* part :
       {"CPU AdamW: 16 threads", "only 1 CPU", "--bind-to none", "PE=", "--cpus-per-task"}) {
    EXPECT_NE(s.message().find(part), std::string::npos) << part << " not in: " << s.message();
  }
}

}  // namespace
}  // namespace zerofit::core
