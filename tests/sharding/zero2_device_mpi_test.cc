// ZeRO-2's stream ordering, proven on a CPU: the same training steps run on the host device (every stream
// operation inline) and on the test device (every stream a thread of its own, a random delay before each
// operation) must end with bit-identical parameters and optimizer state, on every rank, for both
// accumulation modes, with and without offload (and the delayed update), in fp32 and bf16. A missing event
// wait or producer stream lets a copy, accumulation or collective run early on the test device and changes
// the numbers.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator_factory.h"
#include "device/host/host_device.h"
#include "device/test/test_device.h"
#include "sharding/zero2_optimizer.h"
#include "tests/sharding/zero2_mpi_job.h"
#include "tests/sharding/zero2_test_job.h"
#include "tests/support/mpi_test_env.h"

namespace zerofit::sharding {
namespace {

using testjob::Config;
using testjob::GradValue;
using testjob::Outcome;
using testjob::Specs;

void Store(void* dst, core::DType t, size_t i, float v) { core::StoreFromFloat(dst, t, i, v); }

Outcome Train(const Config& c, device::Device* device, comm::Communicator* comm) {
  Outcome out;
  const Zero2Options o = testjob::Options(c);
  auto opt = Zero2Optimizer::Create(Specs(), o, comm, testjob::Devices(device, nullptr));
  EXPECT_TRUE(opt.ok()) << opt.status();
  if (!opt.ok()) return out;
  Zero2Optimizer& z = **opt;
  const auto specs = Specs();
  for (size_t i = 0; i < specs.size(); ++i) {  // nothing is queued yet: the host may write device memory
    for (size_t e = 0; e < specs[i].numel; ++e) Store(z.param_data(i), c.dtype, e, 0.01f * ((e % 13) - 6.0f));
  }
  EXPECT_TRUE(z.InitializeFromParameters().ok());
  const int rank = comm->rank();
  for (int step = 0; step < 4; ++step) {
    const float lr = 1e-2f / (step + 1);  // a schedule: the delayed update must keep its own rate
    for (int micro = 0; micro < 3; ++micro) {
      EXPECT_TRUE(z.BeginMicroBatch(micro == 2).ok());
      // The gradients stay alive until EndMicroBatch: the copies read them on the compute stream.
      std::vector<std::vector<uint8_t>> grads(specs.size());
      for (size_t i = specs.size(); i-- > 0;) {
        grads[i].resize(specs[i].numel * core::DTypeSize(c.dtype));
        for (size_t e = 0; e < specs[i].numel; ++e)
          Store(grads[i].data(), c.dtype, e, GradValue(rank, step, micro, i, e));
        if (c.mode == AccumulationMode::kReduceOncePerStep) {
          // Autograd's in-place accumulation into the flat gradient buffer, done by the host before it
          // reports readiness (the host and test devices share memory with the host).
          EXPECT_TRUE(z.device().compute_stream().Synchronize(absl::Seconds(30)).ok());
          for (size_t e = 0; e < specs[i].numel; ++e) {
            Store(z.grad_data(i), c.dtype, e,
                  core::LoadAsFloat(z.grad_data(i), c.dtype, e) +
                      core::LoadAsFloat(grads[i].data(), c.dtype, e));
          }
          EXPECT_TRUE(z.OnGradientReady(i, nullptr).ok());
        } else {
          EXPECT_TRUE(z.OnGradientReady(i, grads[i].data()).ok());
        }
      }
      EXPECT_TRUE(z.EndMicroBatch(10.0 + rank).ok());
    }
    auto r = z.Step(lr);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) out.grad_norms.push_back(r->grad_norm);
  }
  EXPECT_TRUE(z.Flush().ok());
  const size_t flat_bytes = z.plan().flat_numel() * core::DTypeSize(c.dtype);
  const auto* flat = static_cast<const uint8_t*>(z.param_data(0)) -
                     z.plan().placement(0).flat_offset * core::DTypeSize(c.dtype);
  out.params.assign(flat, flat + flat_bytes);
  const size_t n = z.plan().shard_numel();
  out.master.resize(n);
  out.m.resize(n);
  out.v.resize(n);
  EXPECT_TRUE(z.CopyStateToHost(out.master.data(), out.m.data(), out.v.data()).ok());
  return out;
}

class Zero2DeviceMpiTest : public ::testing::TestWithParam<Config> {};

TEST_P(Zero2DeviceMpiTest, TestDeviceWithRandomDelaysEqualsTheHostDeviceBitForBit) {
  const Config& c = GetParam();
  auto comm = testjob::MakeMpi(absl::Seconds(60));
  ASSERT_NE(comm, nullptr);
  device::HostDevice host;
  const Outcome want = Train(c, &host, comm.get());
  ASSERT_FALSE(want.params.empty());
  for (uint64_t seed : {1u, 2u}) {
    device::TestDeviceOptions to;
    to.seed = seed * 1000 + comm->rank();
    to.max_delay = absl::Microseconds(300);
    device::TestDevice delayed(to);
    const Outcome got = Train(c, &delayed, comm.get());
    ASSERT_EQ(got.params.size(), want.params.size());
    EXPECT_EQ(std::memcmp(got.params.data(), want.params.data(), want.params.size()), 0)
        << c.name << ": parameters differ on rank " << comm->rank() << " (seed " << seed << ")";
    EXPECT_EQ(got.master, want.master) << c.name << ": master weights differ on rank " << comm->rank();
    EXPECT_EQ(got.m, want.m) << c.name;
    EXPECT_EQ(got.v, want.v) << c.name;
    EXPECT_EQ(got.grad_norms, want.grad_norms) << c.name;
  }
}

// The delayed update copies the step's hyper-parameters: a learning-rate change for the next step (made
// while the background update of this one runs) cannot leak into it. The gradients here do not depend on
// the parameters, so one-step-stale parameters change nothing and the delayed run must end exactly where
// the synchronous one does. (Before the fix the background update read the live rate and ended elsewhere.)
TEST(Zero2DelayedUpdateTest, KeepsTheLearningRateOfItsOwnStep) {
  auto comm = testjob::MakeMpi(absl::Seconds(60));
  ASSERT_NE(comm, nullptr);
  device::HostDevice host;
  const Outcome sync =
      Train({"sync", AccumulationMode::kReduceScatterEveryMicroBatch, core::DType::kBFloat16, true, false},
            &host, comm.get());
  const Outcome delayed =
      Train({"delayed", AccumulationMode::kReduceScatterEveryMicroBatch, core::DType::kBFloat16, true, true},
            &host, comm.get());
  ASSERT_FALSE(sync.params.empty());
  EXPECT_EQ(delayed.params, sync.params);
  EXPECT_EQ(delayed.master, sync.master);
  EXPECT_EQ(delayed.m, sync.m);
  EXPECT_EQ(delayed.v, sync.v);
}

// Offload moves the state to the host and the update to the offload pipeline's CPU AdamW (by tile, reading
// the bf16 staging where a bucket was received once), not the arithmetic: on the host device the same job
// ends with the same bits with and without offload, for fp32 and for 8-bit moments, both accumulation modes.
TEST(Zero2OffloadMpiTest, OffloadStepsAsTheOnDeviceUpdaterBitForBit) {
  auto comm = testjob::MakeMpi(absl::Seconds(60));
  ASSERT_NE(comm, nullptr);
  device::HostDevice host;
  for (bool eight_bit : {false, true}) {
    for (AccumulationMode mode :
         {AccumulationMode::kReduceScatterEveryMicroBatch, AccumulationMode::kReduceOncePerStep}) {
      const std::string name = std::string(eight_bit ? "8-bit" : "fp32") + " moments, " +
                               (mode == AccumulationMode::kReduceOncePerStep ? "once" : "every");
      const Outcome on_device =
          Train({name, mode, core::DType::kBFloat16, false, false, eight_bit}, &host, comm.get());
      const Outcome offloaded =
          Train({name, mode, core::DType::kBFloat16, true, false, eight_bit}, &host, comm.get());
      ASSERT_FALSE(on_device.params.empty()) << name;
      EXPECT_EQ(offloaded.params, on_device.params) << name;
      EXPECT_EQ(offloaded.master, on_device.master) << name;
      EXPECT_EQ(offloaded.m, on_device.m) << name;
      EXPECT_EQ(offloaded.v, on_device.v) << name;
      EXPECT_EQ(offloaded.grad_norms, on_device.grad_norms) << name;
    }
  }
}

// Offloaded 8-bit moments in host memory: a code of m and of v per shard element, a scale of each per 256,
// fp32 moments for the parameters under min_8bit_size (norm, w2, head) and the two maps, unpinned (they
// never cross the bus); the pinned rest is fp32 offload's less its 8 B of moments: the master and gradient
// shards (4 + 4 B) and the bf16 staging and parameter copy (2 + 2 B).
TEST(Zero2OffloadMpiTest, OffloadedEightBitMomentsLiveInUnpinnedHostMemory) {
  auto comm = testjob::MakeMpi(absl::Seconds(60));
  ASSERT_NE(comm, nullptr);
  device::TestDevice device;
  const Config c{"offload_8bit",
                 AccumulationMode::kReduceScatterEveryMicroBatch,
                 core::DType::kBFloat16,
                 true,
                 false,
                 true};
  auto opt =
      Zero2Optimizer::Create(Specs(), testjob::Options(c), comm.get(), testjob::Devices(&device, nullptr));
  ASSERT_TRUE(opt.ok()) << opt.status();
  const BucketPlan& plan = (*opt)->plan();
  const size_t n = plan.shard_numel();
  size_t packed = 0;
  for (const ShardSegment& s : plan.segments()) {
    if (plan.params()[s.param].numel < 256) packed += s.numel;
  }
  const size_t moments = 2 * n + 2 * sizeof(float) * (n / 256) + 8 * packed + 2 * 256 * sizeof(float);
  const Zero2MemoryStats m = (*opt)->memory();
  EXPECT_EQ(m.master_bytes, 4 * n);
  EXPECT_EQ(m.exp_avg_bytes + m.exp_avg_sq_bytes, moments);
  EXPECT_EQ(m.pinned_bytes, (4 + 4 + 2 + 2) * n);
  EXPECT_EQ(m.host_state_bytes, m.pinned_bytes + moments);
  EXPECT_EQ((*opt)->moment_scales(), n / 256);
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, Zero2DeviceMpiTest,
    ::testing::Values(
        Config{"every_fp32", AccumulationMode::kReduceScatterEveryMicroBatch, core::DType::kFloat32, false,
               false},
        Config{"every_bf16", AccumulationMode::kReduceScatterEveryMicroBatch, core::DType::kBFloat16, false,
               false},
        Config{"once_fp32", AccumulationMode::kReduceOncePerStep, core::DType::kFloat32, false, false},
        Config{"once_bf16", AccumulationMode::kReduceOncePerStep, core::DType::kBFloat16, false, false},
        Config{"every_bf16_offload", AccumulationMode::kReduceScatterEveryMicroBatch, core::DType::kBFloat16,
               true, false},
        Config{"once_fp32_offload", AccumulationMode::kReduceOncePerStep, core::DType::kFloat32, true, false},
        Config{"every_bf16_offload_delayed", AccumulationMode::kReduceScatterEveryMicroBatch,
               core::DType::kBFloat16, true, true},
        Config{"once_bf16_offload_delayed", AccumulationMode::kReduceOncePerStep, core::DType::kBFloat16,
               true, true},
        Config{"every_bf16_8bit", AccumulationMode::kReduceScatterEveryMicroBatch, core::DType::kBFloat16,
               false, false, true},
        Config{"once_fp32_8bit", AccumulationMode::kReduceOncePerStep, core::DType::kFloat32, false, false,
               true},
        Config{"every_bf16_offload_8bit", AccumulationMode::kReduceScatterEveryMicroBatch,
               core::DType::kBFloat16, true, false, true},
        Config{"once_bf16_offload_delayed_8bit", AccumulationMode::kReduceOncePerStep, core::DType::kBFloat16,
               true, true, true}),
    [](const ::testing::TestParamInfo<Config>& info) { return info.param.name; });

}  // namespace
}  // namespace zerofit::sharding
