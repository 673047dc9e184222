// ZeRO-2 driver across MPI ranks without LibTorch: decisions that all ranks must share (fp16 overflow skips)
// and failures that must surface as errors within the deadline.
#include <gtest/gtest.h>

#include <limits>
#include <thread>
#include <vector>

#include "comm/communicator_factory.h"
#include "sharding/zero2_optimizer.h"
#include "tests/sharding/zero2_mpi_job.h"
#include "tests/support/mpi_test_env.h"

namespace zerofit::sharding {
namespace {

std::vector<ParamSpec> Specs() { return {{"w", 37, true}, {"b", 5, false}, {"head", 64, true}}; }

TEST(Zero2MpiTest, Fp16OverflowOnOneRankSkipsTheStepOnAllRanks) {
  auto comm = testjob::MakeMpi(absl::Seconds(30));
  ASSERT_NE(comm, nullptr);
  Zero2Options o;
  o.param_dtype = core::DType::kFloat16;
  o.bucket_bytes = 64;
  o.loss_scaling.enabled = true;
  o.loss_scaling.initial_scale = 256;
  auto opt = Zero2Optimizer::Create(Specs(), o, comm.get());
  ASSERT_TRUE(opt.ok()) << opt.status();
  const auto specs = Specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    auto* p = static_cast<uint16_t*>((*opt)->param_data(i));
    for (size_t e = 0; e < specs[i].numel; ++e) p[e] = core::FloatToFp16(0.25f);
  }
  ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
    for (size_t i = specs.size(); i-- > 0;) {
      std::vector<uint16_t> g(specs[i].numel, core::FloatToFp16(1.0f));
      // Step 0: only the last rank overflows, in one element of one parameter.
      if (step == 0 && comm->rank() == comm->world_size() - 1 && i == 1) {
        g[2] = core::FloatToFp16(std::numeric_limits<float>::infinity());
      }
      ASSERT_TRUE((*opt)->OnGradientReady(i, g.data()).ok());
    }
    ASSERT_TRUE((*opt)->EndMicroBatch(1).ok());
    auto r = (*opt)->Step(1e-3f);
    ASSERT_TRUE(r.ok()) << r.status();
    if (step == 0) {
      EXPECT_FALSE(r->applied) << "rank " << comm->rank();
      EXPECT_EQ((*opt)->loss_scale(), 128);
      for (size_t i = 0; i < specs.size(); ++i) {
        const auto* p = static_cast<const uint16_t*>((*opt)->param_data(i));
        for (size_t e = 0; e < specs[i].numel; ++e) ASSERT_EQ(core::Fp16ToFloat(p[e]), 0.25f);
      }
    } else {
      EXPECT_TRUE(r->applied);
      EXPECT_EQ((*opt)->step(), 1);
      EXPECT_LT(core::Fp16ToFloat(static_cast<const uint16_t*>((*opt)->param_data(0))[0]), 0.25f);
    }
  }
}

TEST(Zero2MpiTest, ARankThatStopsTakingPartFailsTheStepWithinTheDeadline) {
  if (testing::MpiEnv().world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const absl::Duration timeout = absl::Milliseconds(800);
  auto comm = testjob::MakeMpi(timeout);
  ASSERT_NE(comm, nullptr);
  Zero2Options o;
  o.bucket_bytes = 128;
  auto opt = Zero2Optimizer::Create(Specs(), o, comm.get());
  ASSERT_TRUE(opt.ok()) << opt.status();
  ASSERT_TRUE((*opt)->InitializeFromParameters().ok());
  ASSERT_TRUE((*opt)->BeginMicroBatch(true).ok());
  ASSERT_TRUE((*opt)->EndMicroBatch(1).ok());  // no gradients: buckets reduce as zeros
  if (comm->rank() == 1) {
    // Rank 1 "hangs" before the step, then arrives long after the deadline at the step's norm all-reduce.
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    double late[2] = {0, 0};
    (void)comm::WaitFor(comm->AllReduce(comm::Buffer{late, 2, core::DType::kFloat64}, comm::ReduceOp::kSum),
                        absl::Seconds(1));
  } else {
    const absl::Time start = absl::Now();
    auto r = (*opt)->Step(1e-3f);
    const absl::Duration took = absl::Now() - start;
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
    EXPECT_NE(r.status().message().find("has not arrived"), std::string::npos) << r.status();
    EXPECT_LT(took, timeout + absl::Seconds(1));
  }
  auto fresh = testjob::MakeMpi(absl::Seconds(20));
  ASSERT_NE(fresh, nullptr);
  EXPECT_TRUE(fresh->Barrier(absl::Seconds(20)).ok());
}

}  // namespace
}  // namespace zerofit::sharding
