// The staged decorator's own behaviour over MPI with the test device (the conformance suite covers the
// collectives themselves): staging blocks are reused and grown, only buffers of the staged device are
// staged, and failures (a rank that never arrives, Abort, a broken copy stream) end in errors within the
// deadline and leave the communicator refusing work. Runs with 2 ranks.
#include "comm/staged_communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "comm/communicator_factory.h"
#include "device/test/test_device.h"
#include "tests/support/mpi_test_env.h"

namespace zerofit::comm {
namespace {

using core::DType;

std::unique_ptr<StagedCommunicator> MakeStaged(device::Device* device, absl::Duration timeout) {
  CommContext context;
  context.mpi = &testing::MpiEnv();
  CommOptions options;
  options.timeout = timeout;
  auto mpi = CreateCommunicator(Backend::kMpi, context, options);
  EXPECT_TRUE(mpi.ok()) << mpi.status();
  if (!mpi.ok()) return nullptr;
  auto staged = StagedCommunicator::Create(std::move(*mpi), device);
  EXPECT_TRUE(staged.ok()) << staged.status();
  return staged.ok() ? std::move(*staged) : nullptr;
}

device::TestDeviceOptions Delayed(uint64_t seed) {
  device::TestDeviceOptions o;
  o.seed = seed * 10 + testing::MpiEnv().world_rank();
  o.max_delay = absl::Microseconds(100);
  return o;
}

Buffer Floats(std::vector<float>& v) { return Buffer{v.data(), v.size(), DType::kFloat32, Device::kCpu}; }

TEST(StagedCommunicatorTest, ReusesStagingBlocksAndGrowsThemOnDemand) {
  device::TestDevice dev(Delayed(1));
  auto comm = MakeStaged(&dev, absl::Seconds(30));
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->backend_name(), "mpi+staged");
  const int w = comm->world_size();
  std::vector<float> small(1000, 1.0f);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(WaitFor(comm->AllReduce(Floats(small), ReduceOp::kSum), absl::Seconds(30)).ok());
  EXPECT_EQ(small[0], std::pow(w, 5));
  StagingStats s = comm->stats();
  EXPECT_EQ(s.staged_calls, 5u);
  EXPECT_EQ(s.block_allocations, 1u) << "one collective at a time reuses one block";
  EXPECT_EQ(s.blocks, 1u);

  // Four in flight at once: at most four blocks, and they serve later calls without new allocations.
  std::vector<std::vector<float>> bufs(4, std::vector<float>(1000, 1.0f));
  std::vector<std::unique_ptr<Work>> works;
  for (auto& b : bufs) {
    auto work = comm->AllReduce(Floats(b), ReduceOp::kSum);
    ASSERT_TRUE(work.ok()) << work.status();
    works.push_back(std::move(*work));
  }
  for (auto& work : works) ASSERT_TRUE(work->Wait(absl::Seconds(30)).ok());
  for (auto& b : bufs) EXPECT_EQ(b[999], w);
  s = comm->stats();
  EXPECT_LE(s.blocks, 4u);
  const size_t allocated = s.block_allocations;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(WaitFor(comm->AllReduce(Floats(small), ReduceOp::kSum), absl::Seconds(30)).ok());
  EXPECT_EQ(comm->stats().block_allocations, allocated);

  // A collective larger than every block: the pool grows (one new block, a too-small free one dropped).
  std::vector<float> big(1 << 20, 2.0f);
  const size_t blocks_before = comm->stats().blocks;
  ASSERT_TRUE(WaitFor(comm->AllReduce(Floats(big), ReduceOp::kMax), absl::Seconds(30)).ok());
  EXPECT_EQ(big[12345], 2.0f);
  s = comm->stats();
  EXPECT_EQ(s.block_allocations, allocated + 1);
  EXPECT_EQ(s.blocks, blocks_before);
  EXPECT_GE(s.bytes, big.size() * sizeof(float));
  ASSERT_TRUE(WaitFor(comm->AllReduce(Floats(big), ReduceOp::kMax), absl::Seconds(30)).ok());
  EXPECT_EQ(comm->stats().block_allocations, allocated + 1);
}

// On the test device every buffer is tagged kCpu and staged; a buffer of another kind (kCuda here) is
// handed to the host communicator untouched, which (being MPI) refuses it itself.
TEST(StagedCommunicatorTest, StagesOnlyBuffersOfItsDevice) {
  device::TestDevice dev(Delayed(2));
  auto comm = MakeStaged(&dev, absl::Seconds(30));
  ASSERT_NE(comm, nullptr);
  EXPECT_TRUE(comm->Stages(Device::kCpu));
  EXPECT_FALSE(comm->Stages(Device::kCuda));
  std::vector<float> v(8, 1.0f);
  auto passed = comm->AllReduce(Buffer{v.data(), v.size(), DType::kFloat32, Device::kCuda}, ReduceOp::kSum);
  ASSERT_FALSE(passed.ok());
  EXPECT_NE(passed.status().message().find("CPU buffers only"), std::string::npos) << passed.status();
  EXPECT_EQ(comm->stats().passed_through_calls, 1u);
  EXPECT_EQ(comm->stats().staged_calls, 0u);
  EXPECT_TRUE(comm->Barrier(absl::Seconds(30)).ok());
}

// An in-place all-gather leaves this rank's slot alone, as MPI_IN_PLACE and NCCL do: ZeRO-2 refills it
// (the next update of its shard) on a stream ordered only after the consumer of the gather, so a copy back
// of the whole buffer, late on the decorator's stream, would overwrite the new values with the old ones.
TEST(StagedCommunicatorTest, InPlaceAllGatherNeverWritesThisRanksSlot) {
  device::TestDeviceOptions o = Delayed(7);
  o.max_delay = absl::Microseconds(500);
  device::TestDevice dev(o);
  auto comm = MakeStaged(&dev, absl::Seconds(30));
  ASSERT_NE(comm, nullptr);
  auto consumer = dev.CreateStream();
  auto writer = dev.CreateStream();
  ASSERT_TRUE(consumer.ok() && writer.ok());
  const int w = comm->world_size(), r = comm->rank();
  const size_t n = 64;
  std::vector<float> all(n * w), fresh(n, -1.0f);
  for (int round = 0; round < 20; ++round) {
    for (size_t i = 0; i < n; ++i) all[r * n + i] = static_cast<float>(round);
    auto work = comm->AllGather(Buffer{&all[r * n], n, DType::kFloat32, Device::kCpu},
                                Buffer{all.data(), n * w, DType::kFloat32, Device::kCpu});
    ASSERT_TRUE(work.ok()) << work.status();
    ASSERT_TRUE((*work)->OrderBefore(**consumer, absl::Seconds(30)).ok());
    // The next value of this rank's slot, on a stream that is not the consumer.
    ASSERT_TRUE((*writer)->Copy(&all[r * n], fresh.data(), n * sizeof(float)).ok());
    ASSERT_TRUE((*writer)->Synchronize(absl::Seconds(30)).ok());
    ASSERT_TRUE((*work)->Wait(absl::Seconds(30)).ok());
    ASSERT_TRUE((*consumer)->Synchronize(absl::Seconds(30)).ok());
    for (size_t i = 0; i < n; ++i)
      ASSERT_EQ(all[r * n + i], -1.0f) << "round " << round << ": slot overwritten";
    for (int q = 0; q < w; ++q) {
      if (q != r) {
        ASSERT_EQ(all[q * n], static_cast<float>(round)) << "round " << round << " slot " << q;
      }
    }
  }
}

TEST(StagedCommunicatorTest, RankThatNeverArrivesGivesDeadlineExceeded) {
  if (testing::MpiEnv().world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const absl::Duration timeout = absl::Milliseconds(800);
  device::TestDevice dev(Delayed(3));
  // The abandoned collective's staging block is leaked on purpose; its device buffer must outlive the
  // communicator (a late copy back never happens: the op failed).
  std::vector<float> buf(16, 1.0f);
  {
    auto comm = MakeStaged(&dev, timeout);
    ASSERT_NE(comm, nullptr);
    if (comm->rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      (void)WaitFor(comm->AllReduce(Floats(buf), ReduceOp::kSum), absl::Seconds(1));
    } else {
      const absl::Time start = absl::Now();
      auto work = comm->AllReduce(Floats(buf), ReduceOp::kSum);
      ASSERT_TRUE(work.ok()) << work.status();
      const absl::Status s = (*work)->Wait(absl::Seconds(30));
      const absl::Duration took = absl::Now() - start;
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
      EXPECT_NE(s.message().find("has not arrived"), std::string::npos) << s;
      EXPECT_LT(took, timeout + absl::Seconds(2))
          << "the error must come near the deadline, not after a hang";
      EXPECT_EQ(buf[0], 1.0f) << "a failed collective copies nothing back";
      // OrderBefore reports the failure too, and later calls are refused.
      device::TestDevice other(Delayed(4));
      auto consumer = other.CreateStream();
      ASSERT_TRUE(consumer.ok());
      EXPECT_EQ((*work)->OrderBefore(**consumer, absl::Seconds(1)).code(),
                absl::StatusCode::kDeadlineExceeded);
      EXPECT_EQ(comm->AllReduce(Floats(buf), ReduceOp::kSum).status().code(),
                absl::StatusCode::kFailedPrecondition);
      EXPECT_EQ(comm->Barrier(absl::Seconds(1)).code(), absl::StatusCode::kFailedPrecondition);
    }
    // Destruction with an abandoned collective is bounded.
  }
  auto fresh = MakeStaged(&dev, absl::Seconds(20));
  ASSERT_NE(fresh, nullptr);
  EXPECT_TRUE(fresh->Barrier(absl::Seconds(20)).ok());
}

TEST(StagedCommunicatorTest, AbortFailsAPendingCollectiveAtOnce) {
  if (testing::MpiEnv().world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  device::TestDevice dev(Delayed(5));
  std::vector<float> buf(16, 1.0f);
  {
    auto comm = MakeStaged(&dev, absl::Seconds(20));
    ASSERT_NE(comm, nullptr);
    if (comm->rank() == 0) {
      // Nobody else joins this collective: only Abort can end it before its 20 s deadline.
      auto work = comm->AllReduce(Floats(buf), ReduceOp::kSum);
      ASSERT_TRUE(work.ok()) << work.status();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const absl::Time start = absl::Now();
      comm->Abort();
      EXPECT_LT(absl::Now() - start, absl::Milliseconds(100)) << "Abort must not block";
      EXPECT_EQ((*work)->Wait(absl::Seconds(5)).code(), absl::StatusCode::kAborted);
      EXPECT_LT(absl::Now() - start, absl::Seconds(2));
      EXPECT_EQ(comm->AllReduce(Floats(buf), ReduceOp::kSum).status().code(), absl::StatusCode::kAborted);
    }
  }
  auto fresh = MakeStaged(&dev, absl::Seconds(20));
  ASSERT_NE(fresh, nullptr);
  EXPECT_TRUE(fresh->Barrier(absl::Seconds(20)).ok());
}

// A copy stream that breaks (here: its wait for the producer passes the test device's event deadline, as a
// device fault would) fails the collective instead of copying back garbage, and breaks the communicator.
TEST(StagedCommunicatorTest, ABrokenCopyStreamFailsTheCollective) {
  device::TestDeviceOptions o = Delayed(6);
  o.wait_timeout = absl::Milliseconds(200);
  device::TestDevice dev(o);
  auto comm = MakeStaged(&dev, absl::Seconds(20));
  ASSERT_NE(comm, nullptr);
  auto producer = dev.CreateStream();
  ASSERT_TRUE(producer.ok());
  ASSERT_TRUE((*producer)
                  ->HostFunc([] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(600));
                    return absl::OkStatus();
                  })
                  .ok());
  std::vector<float> buf(16, 1.0f);
  const absl::Status s =
      WaitFor(comm->AllReduce(Floats(buf), ReduceOp::kSum, producer->get()), absl::Seconds(20));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("event wait inside a stream"), std::string::npos) << s;
  EXPECT_EQ(buf[0], 1.0f);
  EXPECT_EQ(comm->AllReduce(Floats(buf), ReduceOp::kSum).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*producer)->Synchronize(absl::Seconds(5)).ok());
}

}  // namespace
}  // namespace zerofit::comm
