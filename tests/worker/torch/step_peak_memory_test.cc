// Each training step reports this rank's device peak over that step (worker/torch/train/training_backend.h):
// the CUDA caching allocator's peak, reset at the step's start, plus what zerofit's device seam holds on the
// device outside that allocator (ZeRO-2's flat buffers and optimizer state), so that the figure compares
// with `zerofit plan`'s predicted device peak.
//   unit: the seam's part, on the test device (which stands for a device: LibTorch computes on the CPU and
//         the seam's buffers are counted as device memory), and nothing on the host device.
//   gpu:  the reset, on cuda:0: a step of one pair after a step of 32 reports a smaller peak (skips without a
//         GPU visible to a CUDA LibTorch).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "comm/local/local_communicator.h"
#include "nlohmann/json.hpp"
#include "tests/worker/data/char_model_dir.h"
#include "tests/worker/data/test_support.h"
#include "worker/torch/train/preference_session.h"

namespace zerofit::worker {
namespace {

using data::testing::ScopedTempDir;

// `n` pairs of token ids, each prompt + response exactly `length` tokens (a prompt of length / 2).
void WriteIdPairs(const ScopedTempDir& dir, const std::string& split, int n, int length, uint32_t seed) {
  std::mt19937 rng(seed);
  const int vocab = data::testing::CharModelVocabSize();
  auto tokens = [&](int count) {
    std::vector<int32_t> ids;
    for (int i = 0; i < count; ++i) ids.push_back(2 + static_cast<int32_t>(rng() % (vocab - 2)));
    return ids;
  };
  std::ofstream out(dir.File(split + "_ids.jsonl"));
  for (int i = 0; i < n; ++i) {
    out << nlohmann::json{{"prompt_ids", tokens(length / 2)},
                          {"chosen_ids", tokens(length - length / 2)},
                          {"rejected_ids", tokens(length - length / 2)}}
               .dump()
        << "\n";
  }
}

std::vector<uint64_t> FirstPairs(uint64_t n) {
  std::vector<uint64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

class StepPeakMemoryTest : public ::testing::Test {
 protected:
  static constexpr int kLength = 96;

  void SetUp() override {
    data::testing::WriteCharModelDir(dir_.path().string());
    WriteIdPairs(dir_, "train", 32, kLength, 1);
    WriteIdPairs(dir_, "test", 4, kLength, 2);
  }
  PreferenceTrainOptions Options(device::DeviceChoice device) const {
    PreferenceTrainOptions o;
    o.task = PreferenceTrainOptions::Task::kReward;
    o.model_dir = dir_.path().string();
    o.data = data::DataSourceOfDirectory(dir_.path().string());
    o.steps = 2;
    o.global_batch = 32;
    o.gradient_accumulation = 1;
    o.max_length = kLength;
    o.device = device;
    return o;
  }
  ScopedTempDir dir_;
};

// The device bytes that ZeRO-2 reports for itself when its optimizer state lives on the device (no offload),
// the same sum as the planner's probe (worker/torch/train/memory_probe.cc).
size_t Zero2DeviceBytes(const sharding::Zero2MemoryStats& m) {
  return m.flat_param_bytes + m.flat_grad_bytes + m.staging_bytes_peak + m.recv_bytes +
         m.optimizer_state_bytes() + m.shard_grad_bytes;
}

TEST_F(StepPeakMemoryTest, TheDevicePeakCountsTheBuffersTheSeamHoldsOutsideLibTorch) {
  comm::LocalCommunicator comm;
  auto session = PreferenceSession::Create(Options(device::DeviceChoice::kTest), {}, &comm);
  ASSERT_TRUE(session.ok()) << session.status();
  auto r = (*session)->Step(0, {FirstPairs(8)});
  ASSERT_TRUE(r.ok()) << r.status();
  const size_t zero2 = Zero2DeviceBytes((*session)->Summary().memory);
  ASSERT_GT(zero2, 0u);
  // Besides ZeRO-2's buffers, the device updater holds one double: its sum-of-squares accumulator
  // (sharding/device_shard_updater.cc).
  EXPECT_EQ(r->peak.device_seam, zero2 + sizeof(double));
  // LibTorch computes on the CPU here: the caching allocator adds nothing.
  EXPECT_EQ(r->peak.device_allocated, r->peak.device_seam);
  EXPECT_EQ(r->peak.device_reserved, r->peak.device_seam);
  EXPECT_GT(r->peak.host_rss, 0u);
}

TEST_F(StepPeakMemoryTest, TheHostDeviceReportsNoDevicePeak) {
  comm::LocalCommunicator comm;
  auto session = PreferenceSession::Create(Options(device::DeviceChoice::kCpu), {}, &comm);
  ASSERT_TRUE(session.ok()) << session.status();
  auto r = (*session)->Step(0, {FirstPairs(8)});
  ASSERT_TRUE(r.ok()) << r.status();
  // Its "device" buffers are host memory, which host_rss counts.
  EXPECT_EQ(r->peak.device_seam, 0u);
  EXPECT_EQ(r->peak.device_allocated, 0u);
  EXPECT_EQ(r->peak.device_reserved, 0u);
}

TEST_F(StepPeakMemoryTest, GpuEachStepReportsItsOwnPeak) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU visible to a CUDA LibTorch";
  comm::LocalCommunicator comm;
  auto session = PreferenceSession::Create(Options(device::DeviceChoice::kCuda), {}, &comm);
  ASSERT_TRUE(session.ok()) << session.status();
  auto big = (*session)->Step(0, {FirstPairs(32)});
  ASSERT_TRUE(big.ok()) << big.status();
  auto small = (*session)->Step(1, {FirstPairs(1)});
  ASSERT_TRUE(small.ok()) << small.status();
  std::printf("device peak allocated/reserved: 32 pairs %zu/%zu bytes, 1 pair %zu/%zu bytes (seam %zu)\n",
              big->peak.device_allocated, big->peak.device_reserved, small->peak.device_allocated,
              small->peak.device_reserved, small->peak.device_seam);
  EXPECT_EQ(small->peak.device_seam, big->peak.device_seam);
  EXPECT_GT(small->peak.device_allocated, small->peak.device_seam) << "LibTorch allocates on the GPU";
  // Without the reset at each step's start the second step would report the first one's peak: 32 pairs of
  // 96 tokens need more activation memory than one pair.
  EXPECT_LT(small->peak.device_allocated, big->peak.device_allocated);
  EXPECT_GE(big->peak.device_reserved, big->peak.device_allocated);
}

}  // namespace
}  // namespace zerofit::worker
