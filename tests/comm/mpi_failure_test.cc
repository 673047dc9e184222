// Bad input across ranks must give a clear error within the timeout, never a hang or a crash.
// Runs with 2+ ranks.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "comm/mpi/mpi_communicator.h"
#include "tests/support/mpi_test_env.h"

namespace zerofit::comm {
namespace {

std::unique_ptr<MpiCommunicator> Make(CommOptions options) {
  auto c = MpiCommunicator::Create(testing::MpiEnv(), options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(MpiFailureTest, RanksDisagreeingOnCountGetInvalidArgument) {
  if (testing::MpiEnv().world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  CommOptions options;
  options.timeout = absl::Seconds(20);
  options.check_collectives = true;
  auto comm = Make(options);
  ASSERT_NE(comm, nullptr);
  // Rank 1 passes one element more than everybody else.
  std::vector<float> buf(comm->rank() == 1 ? 5 : 4, 1.0f);
  Buffer b{buf.data(), buf.size(), core::DType::kFloat32};
  const absl::Status s = WaitFor(comm->AllReduce(b, ReduceOp::kSum), absl::Seconds(30));
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("element count"), std::string::npos) << s;
  EXPECT_NE(s.message().find("from 4 to 5"), std::string::npos) << s;
  // The buffers were not touched by a mismatched reduction.
  for (float v : buf) EXPECT_EQ(v, 1.0f);
  // A failed communicator refuses further work instead of silently mismatching.
  EXPECT_EQ(comm->AllReduce(b, ReduceOp::kSum).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(MpiFailureTest, RankThatNeverArrivesGivesDeadlineExceeded) {
  if (testing::MpiEnv().world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const absl::Duration timeout = absl::Milliseconds(800);
  // An abandoned collective may still complete when the late rank finally arrives, so its buffer must outlive
  // the communicator (in a real job the process exits first).
  std::vector<float> buf(16, 1.0f);
  Buffer b{buf.data(), buf.size(), core::DType::kFloat32};
  {
    CommOptions options;
    options.timeout = timeout;
    auto comm = Make(options);
    ASSERT_NE(comm, nullptr);
    if (comm->rank() == 1) {
      // Rank 1 is "hung": it arrives long after everybody else's deadline.
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      (void)WaitFor(comm->AllReduce(b, ReduceOp::kSum), absl::Seconds(1));
    } else {
      const absl::Time start = absl::Now();
      const absl::Status s = WaitFor(comm->AllReduce(b, ReduceOp::kSum), absl::Seconds(30));
      const absl::Duration took = absl::Now() - start;
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
      EXPECT_NE(s.message().find("has not arrived"), std::string::npos) << s;
      EXPECT_GE(took, timeout);
      EXPECT_LT(took, timeout + absl::Seconds(1))
          << "the error must come within the timeout, not after a hang";
      const absl::Status b2 = comm->Barrier(absl::Seconds(1));
      EXPECT_EQ(b2.code(), absl::StatusCode::kFailedPrecondition) << b2;
    }
    // Destroying a communicator with an abandoned collective must not hang (bounded grace period).
  }
  // The late rank's collective was abandoned; a fresh communicator works for everybody.
  CommOptions options;
  options.timeout = absl::Seconds(20);
  auto fresh = Make(options);
  ASSERT_NE(fresh, nullptr);
  EXPECT_TRUE(fresh->Barrier(absl::Seconds(20)).ok());
}

TEST(MpiFailureTest, AbortFailsPendingAndLaterCallsWithoutBlocking) {
  CommOptions options;
  options.timeout = absl::Seconds(20);
  auto comm = Make(options);
  ASSERT_NE(comm, nullptr);
  ASSERT_TRUE(comm->Barrier(absl::Seconds(20)).ok());
  const absl::Time start = absl::Now();
  comm->Abort();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));
  std::vector<float> buf(4, 1.0f);
  EXPECT_EQ(comm->AllReduce(Buffer{buf.data(), 4, core::DType::kFloat32}, ReduceOp::kSum).status().code(),
            absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace zerofit::comm
