// The offload pipeline's host work (offload/offload_pipeline.h): gradient shards that land from the device
// are accumulated on the host thread pool, started by an event per copy, never inside a device host function.
// On the test device (random per-stream delays, streams of different speeds), with host functions run as
// CUDA runs them (one at a time, one thread) and without: the fp32 accumulators equal a serial reference bit
// for bit (the same fp32 additions in the same order per element), micro-batch after micro-batch through the
// same staging (a copy must not overwrite staging that a pending job still reads), for 1 and 3 threads.
#include "offload/offload_pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "device/kernels.h"
#include "device/test/test_device.h"

namespace zerofit::offload {
namespace {

using core::DType;

// Buckets of odd sizes: each spans several of the pipeline's host chunks (2^18 elements) and a partial one.
const std::vector<size_t> kBuckets = {300001, 5, 530000};
constexpr int kMicroBatches = 4;

size_t Total() {
  size_t n = 0;
  for (size_t b : kBuckets) n += b;
  return n;
}

// Random gradients in `dtype` for one micro-batch: values in [-1, 1), rounded to the dtype.
std::vector<char> RandomGradients(DType dtype, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<char> out(n * core::DTypeSize(dtype));
  for (size_t i = 0; i < n; ++i) core::StoreFromFloat(out.data(), dtype, i, u(rng));
  return out;
}

// The gradient norm's sum of squares across the pool: bit for bit the serial device::HostSumOfSquares
// (whatever the thread count), and within fp64 summation's bound of a long-double sum (each float square is
// exact in fp64; n positive terms in any order: relative error <= n u, u = 2^-53). Then the parallel
// zeroing clears every element.
void ExpectSumOfSquaresAndZeroing(OffloadPipeline& pipeline, const std::vector<float>& reference) {
  double serial = 0.0;
  device::HostSumOfSquares(reference.data(), reference.size(), &serial);
  const double parallel = pipeline.SumOfSquares(0);
  EXPECT_EQ(std::memcmp(&parallel, &serial, sizeof(double)), 0) << parallel << " vs " << serial;
  long double exact = 0.0L;
  for (float x : reference) exact += static_cast<long double>(x) * x;
  const double bound =
      static_cast<double>(reference.size()) * std::ldexp(1.0, -53) * static_cast<double>(exact);
  EXPECT_NEAR(parallel, static_cast<double>(exact), bound);
  pipeline.ZeroGradients(0);
  const float* g = pipeline.gradients(0);
  EXPECT_EQ(std::count(g, g + reference.size(), 0.0f), static_cast<std::ptrdiff_t>(reference.size()));
}

class OffloadPipelineTest : public ::testing::TestWithParam<std::tuple<DType, int, bool>> {};

TEST_P(OffloadPipelineTest, AccumulatesEveryReceiveAsTheSerialReferenceDoes) {
  const auto [dtype, threads, serial_host_functions] = GetParam();
  device::TestDeviceOptions dopt;
  dopt.serial_host_functions = serial_host_functions;
  device::TestDevice device(dopt);
  OffloadPipelineOptions o;
  o.shard_numel = Total();
  o.param_dtype = dtype;
  o.threads = threads;
  std::atomic<int> host_jobs{0};  // the step profile's "host accumulate" intervals, one per receive
  o.on_host_job = [&](absl::Time begin, absl::Time end) {
    EXPECT_LE(begin, end);
    ++host_jobs;
  };
  auto pipeline = OffloadPipeline::Create(&device, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  (*pipeline)->ZeroGradients(0);

  // Every micro-batch's gradients are made first, so that the receives below follow each other as fast as
  // an engine's would: a copy then overwrites staging while the previous micro-batch's job may still read it.
  std::vector<float> reference(Total(), 0.0f);
  std::vector<device::Buffer> sources;  // "device" memory, one buffer per micro-batch
  for (int m = 0; m < kMicroBatches; ++m) {
    const std::vector<char> g = RandomGradients(dtype, Total(), 100 + m);
    core::AccumulateToFloat(g.data(), dtype, reference.data(), Total());
    auto src = device.Allocate(g.size(), device::MemoryKind::kDevice);
    ASSERT_TRUE(src.ok()) << src.status();
    std::memcpy(src->data(), g.data(), g.size());
    sources.push_back(std::move(*src));
  }
  for (device::Buffer& src : sources) {
    size_t offset = 0;
    for (size_t n : kBuckets) {
      ASSERT_TRUE((*pipeline)->ReceiveGradient(0, offset, n, src.at(offset * core::DTypeSize(dtype))).ok());
      offset += n;
    }
  }
  ASSERT_TRUE((*pipeline)->WaitGradients(absl::Seconds(60)).ok());
  EXPECT_EQ(std::memcmp((*pipeline)->gradients(0), reference.data(), Total() * sizeof(float)), 0);
  EXPECT_EQ(device.host_functions_run(), 0u) << "host work ran inside device host functions";
  EXPECT_EQ(host_jobs.load(), kMicroBatches * static_cast<int>(kBuckets.size()));
  ExpectSumOfSquaresAndZeroing(**pipeline, reference);
}

INSTANTIATE_TEST_SUITE_P(DtypesThreadsHostFunctionModes, OffloadPipelineTest,
                         ::testing::Combine(::testing::Values(DType::kBFloat16, DType::kFloat32),
                                            ::testing::Values(1, 3), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(core::DTypeName(std::get<0>(info.param))) + "_threads" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_serial_host_functions" : "");
                         });

// ZeroGradients marks the buffer instead of writing it (LazyZeroRanges): a step that receives only some
// ranges, one of them across the boundary of a received one, still reads zeros everywhere else, and the next
// step's receives replace the last step's sums instead of adding to them. Buffer contents are poisoned first,
// so nothing relies on a zeroed allocation.
TEST(OffloadPipelineLazyZeroTest, RangesNoReceiveCoveredReadAsZero) {
  device::TestDevice device;
  OffloadPipelineOptions o;
  o.shard_numel = 1000;
  o.param_dtype = DType::kFloat32;
  o.threads = 2;
  auto pipeline = OffloadPipeline::Create(&device, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  OffloadPipeline& p = **pipeline;
  float* raw = p.gradients(0);
  std::fill(raw, raw + 1000, 7.0f);  // what an earlier step left
  p.ZeroGradients(0);
  auto src = device.Allocate(1000 * sizeof(float), device::MemoryKind::kDevice);
  ASSERT_TRUE(src.ok());
  for (int k = 0; k < 1000; ++k) src->as<float>()[k] = static_cast<float>(k + 1);
  auto receive = [&](size_t offset, size_t n) {
    return p.ReceiveGradient(0, offset, n, src->at(offset * sizeof(float)));
  };
  // [100, 300) twice (overwritten, then added), [250, 400) across its end (partly pending), nothing else.
  ASSERT_TRUE(receive(100, 200).ok());
  ASSERT_TRUE(receive(100, 200).ok());
  ASSERT_TRUE(receive(250, 150).ok());
  ASSERT_TRUE(p.WaitGradients(absl::Seconds(60)).ok());
  std::vector<float> want(1000, 0.0f);
  for (int k = 100; k < 300; ++k) want[k] = 2.0f * (k + 1);
  for (int k = 250; k < 400; ++k) want[k] += static_cast<float>(k + 1);
  double squares = 0.0;
  device::HostSumOfSquares(want.data(), want.size(), &squares);
  EXPECT_EQ(p.SumOfSquares(0), squares);
  EXPECT_EQ(std::vector<float>(p.gradients(0), p.gradients(0) + 1000), want);
  // The next step: one receive over everything replaces the sums.
  p.ZeroGradients(0);
  ASSERT_TRUE(receive(0, 1000).ok());
  ASSERT_TRUE(p.WaitGradients(absl::Seconds(60)).ok());
  const float* g = p.gradients(0);
  for (int k = 0; k < 1000; ++k) ASSERT_EQ(g[k], static_cast<float>(k + 1)) << k;
}

TEST(OffloadPipelineDeadlineTest, ACopyThatNeverLandsFailsTheWaitInsteadOfHanging) {
  device::TestDevice device;
  OffloadPipelineOptions o;
  o.shard_numel = 1024;
  o.param_dtype = DType::kBFloat16;
  o.wait_timeout = absl::Milliseconds(50);
  auto pipeline = OffloadPipeline::Create(&device, o);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  // The copy stream is held up past the host job's deadline: its copy has not landed when the job gives up.
  ASSERT_TRUE((*pipeline)
                  ->d2h_stream()
                  .HostFunc([] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(500));
                    return absl::OkStatus();
                  })
                  .ok());
  auto src = device.Allocate(1024 * 2, device::MemoryKind::kDevice);
  ASSERT_TRUE(src.ok());
  ASSERT_TRUE((*pipeline)->ReceiveGradient(0, 0, 1024, src->data()).ok());
  const absl::Status s = (*pipeline)->WaitGradients(absl::Seconds(30));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(std::string(s.message()).find("offload host job"), std::string::npos) << s;
  // Sticky: the gradients are incomplete, and every later wait says so.
  EXPECT_EQ((*pipeline)->WaitGradients(absl::Seconds(30)).code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace zerofit::offload
