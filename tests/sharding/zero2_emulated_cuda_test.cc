// The ZeRO-2 engine on the CUDA device, run on the emulated GPU (tests/cuda_emulation: the CUDA device's own
// code, its streams as threads, its kernels as host threads; built with -DZEROFIT_CUDA_EMULATION=ON, as the
// sanitizer builds are). The test job trained there, through a staged communicator as ranks that share a GPU
// do, must end bit for bit where the host device ends: the engine's kernels (accumulate, convert, AdamW,
// 8-bit AdamW) are the host references' arithmetic, and the only sum whose order differs, the gradient norm,
// is reported, not applied (no clipping here; it must agree to fp64 rounding). Every mode: both accumulation
// modes, fp32 and bf16, 8-bit moments, offload with and without the delayed update. A host access to device
// memory, a kernel handed pageable memory or a missing stream order shows up here before it reaches a GPU.
// And a checkpoint saved there resumes there, in a fresh engine, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "comm/local/local_communicator.h"
#include "comm/staged_communicator.h"
#include "device/device_factory.h"
#include "device/host/host_device.h"
#include "sharding/checkpoint.h"
#include "tests/sharding/zero2_stream_training.h"
#include "tests/sharding/zero2_test_job.h"
#include "tests/support/temp_dir.h"

namespace zerofit::sharding {
namespace {

using test_support::TempDir;
using testjob::Config;
using testjob::Outcome;

std::unique_ptr<device::Device> EmulatedCuda() {
  device::DeviceOptions o;
  o.choice = device::DeviceChoice::kCuda;
  auto cuda = device::CreateDevice(o);
  EXPECT_TRUE(cuda.ok()) << cuda.status();
  if (!cuda.ok()) return nullptr;
  EXPECT_EQ((*cuda)->kind(), device::DeviceKind::kCuda);
  return std::move(*cuda);
}

void ExpectSameOutcome(const Outcome& got, const Outcome& want, const std::string& name) {
  EXPECT_EQ(got.params, want.params) << name << ": parameters differ";
  EXPECT_EQ(got.master, want.master) << name << ": master weights differ";
  EXPECT_EQ(got.m, want.m) << name;
  EXPECT_EQ(got.v, want.v) << name;
  ASSERT_EQ(got.grad_norms.size(), want.grad_norms.size());
  for (size_t i = 0; i < want.grad_norms.size(); ++i) {
    // The device sums the squares in fp64 as a tree, the host in index order: ~1e-16 relative per term;
    // the norm is then rounded to fp32, so the two agree to an fp32 ulp.
    EXPECT_NEAR(got.grad_norms[i], want.grad_norms[i], std::ldexp(std::fabs(want.grad_norms[i]), -23))
        << name << " step " << i;
  }
}

// The job's uninterrupted run on the host device (`want`), and the emulated CUDA device with a staged
// communicator over the same local one, for the test to train on.
class EmulatedCudaJob : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    want_ = testjob::TrainThroughComputeStream(GetParam(), &host_, &local_, &local_);
    ASSERT_FALSE(want_.params.empty());
    cuda_ = EmulatedCuda();
    ASSERT_NE(cuda_, nullptr);
    auto staged = comm::StagedCommunicator::Create(&local_, cuda_.get());
    ASSERT_TRUE(staged.ok()) << staged.status();
    staged_ = std::move(*staged);
  }

  comm::LocalCommunicator local_;
  device::HostDevice host_;
  Outcome want_;
  std::unique_ptr<device::Device> cuda_;
  std::unique_ptr<comm::StagedCommunicator> staged_;  // after cuda_: destroyed before the device it uses
};

class Zero2EmulatedCudaTest : public EmulatedCudaJob {};

TEST_P(Zero2EmulatedCudaTest, TheEngineOnTheCudaDeviceEndsWhereTheHostDeviceDoes) {
  const Config& c = GetParam();
  const Outcome got = testjob::TrainThroughComputeStream(c, cuda_.get(), staged_.get(), &local_);
  ExpectSameOutcome(got, want_, c.name);
}

// A checkpoint saved from the CUDA device (the state leaves through the updater's copies: 8-bit codes as
// dequantised moments and their blocks' scales) resumes there, in a fresh engine, where the uninterrupted
// run on the host device goes on, bit for bit.
class Zero2EmulatedCudaResumeTest : public EmulatedCudaJob {};

TEST_P(Zero2EmulatedCudaResumeTest, ACheckpointFromTheCudaDeviceResumesWhereTheHostDeviceGoesOn) {
  const Config& c = GetParam();
  const TempDir dir("zero2_emulated_cuda_resume");
  constexpr int kSaveAt = 2;
  Outcome got;
  auto first = testjob::MakeJobOptimizer(c, cuda_.get(), staged_.get(), &local_);
  ASSERT_NE(first, nullptr);
  testjob::TrainJobSteps(*first, c, 0, kSaveAt, &got.grad_norms);
  auto saved = SaveCheckpoint(*first, dir.path());
  ASSERT_TRUE(saved.ok()) << saved.status();
  first.reset();                                                                    // the "crash"
  auto second = testjob::MakeJobOptimizer(c, cuda_.get(), staged_.get(), &local_);  // overwritten by the load
  ASSERT_NE(second, nullptr);
  auto loaded = LoadCheckpoint(*second, dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->step, kSaveAt);
  testjob::TrainJobSteps(*second, c, kSaveAt, testjob::kSteps - kSaveAt, &got.grad_norms);
  testjob::ReadJobOutcome(*second, c, &got);
  ExpectSameOutcome(got, want_, c.name);
}

Config Unclipped(Config c) {
  c.clip = false;
  return c;
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, Zero2EmulatedCudaTest,
    ::testing::Values(Unclipped({"every_bf16", AccumulationMode::kReduceScatterEveryMicroBatch,
                                 core::DType::kBFloat16, false, false}),
                      Unclipped({"once_fp32", AccumulationMode::kReduceOncePerStep, core::DType::kFloat32,
                                 false, false}),
                      Unclipped({"every_bf16_8bit", AccumulationMode::kReduceScatterEveryMicroBatch,
                                 core::DType::kBFloat16, false, false, true}),
                      Unclipped({"once_fp32_8bit", AccumulationMode::kReduceOncePerStep,
                                 core::DType::kFloat32, false, false, true}),
                      Unclipped({"every_fp32_offload", AccumulationMode::kReduceScatterEveryMicroBatch,
                                 core::DType::kFloat32, true, false}),
                      Unclipped({"once_bf16_offload_delayed", AccumulationMode::kReduceOncePerStep,
                                 core::DType::kBFloat16, true, true}),
                      Unclipped({"every_bf16_offload_8bit", AccumulationMode::kReduceScatterEveryMicroBatch,
                                 core::DType::kBFloat16, true, false, true}),
                      Unclipped({"once_bf16_offload_delayed_8bit", AccumulationMode::kReduceOncePerStep,
                                 core::DType::kBFloat16, true, true, true})),
    [](const ::testing::TestParamInfo<Config>& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    OnDeviceAndOffloaded, Zero2EmulatedCudaResumeTest,
    ::testing::Values(Unclipped({"once_fp32", AccumulationMode::kReduceOncePerStep, core::DType::kFloat32,
                                 false, false}),
                      Unclipped({"every_bf16_8bit", AccumulationMode::kReduceScatterEveryMicroBatch,
                                 core::DType::kBFloat16, false, false, true}),
                      Unclipped({"every_bf16_offload_8bit", AccumulationMode::kReduceScatterEveryMicroBatch,
                                 core::DType::kBFloat16, true, false, true})),
    [](const ::testing::TestParamInfo<Config>& info) { return info.param.name; });

}  // namespace
}  // namespace zerofit::sharding
