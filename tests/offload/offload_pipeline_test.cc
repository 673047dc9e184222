// The offload pipeline's host work (offload/offload_pipeline.h): gradient shards that land from the device
// are accumulated on the host thread pool, started by an event per copy, never inside a device host function.
// On the test device (random per-stream delays, streams of different speeds), with host functions run as
// CUDA runs them (one at a time, one thread) and without: the fp32 accumulators equal a serial reference bit
// for bit (the same fp32 additions in the same order per element), micro-batch after micro-batch through the
// same staging (a copy must not overwrite staging that a pending job still reads), for 1 and 3 threads. A
// step's first receive stays in the bf16 staging: the norm and AdamW read it there, with the bits of the
// fp32 route.
#include "offload/offload_pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "device/kernels.h"
#include "device/test/test_device.h"
#include "optim/adamw_8bit.h"

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
  std::atomic<int> host_jobs{0};  // the step profile's "host accumulate" intervals
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
    const bool last = &src == &sources.back();
    size_t offset = 0;
    for (size_t n : kBuckets) {
      ASSERT_TRUE(
          (*pipeline)->ReceiveGradient(0, offset, n, src.at(offset * core::DTypeSize(dtype)), last).ok());
      offset += n;
    }
  }
  ASSERT_TRUE((*pipeline)->WaitGradients(absl::Seconds(60)).ok());
  EXPECT_EQ(std::memcmp((*pipeline)->gradients(0), reference.data(), Total() * sizeof(float)), 0);
  EXPECT_EQ(device.host_functions_run(), 0u) << "host work ran inside device host functions";
  // A job per receive: the first micro-batch's convert, every later one's add.
  EXPECT_EQ(host_jobs.load(), kMicroBatches * static_cast<int>(kBuckets.size()));
  EXPECT_EQ((*pipeline)->converted_elements(0), Total());
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
    // Each says it is the last: a second receive into a staged range converts it first.
    return p.ReceiveGradient(0, offset, n, src->at(offset * sizeof(float)), /*last_of_step=*/true);
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

// Two micro-batches' random gradients (seeds seed, seed + 1) in device memory, as reduced shards land.
struct TwoSources {
  device::Buffer g1, g2;
  static TwoSources Make(device::Device& device, DType dtype, size_t n, uint32_t seed) {
    TwoSources t;
    for (auto [buffer, s] : {std::pair<device::Buffer*, uint32_t>{&t.g1, seed}, {&t.g2, seed + 1}}) {
      const std::vector<char> g = RandomGradients(dtype, n, s);
      auto b = device.Allocate(g.size(), device::MemoryKind::kDevice);
      EXPECT_TRUE(b.ok()) << b.status();
      if (!b.ok()) return t;
      std::memcpy(b->data(), g.data(), g.size());
      *buffer = std::move(*b);
    }
    return t;
  }
};

// The norm and AdamW of a step whose buckets were received once (staged, bf16), twice (accumulated in
// fp32), or not at all (zero), against the same pipeline state read through gradients(i), which converts
// everything to fp32 first: bit for bit, for the master weights, both moments and the bf16 parameter copy.
class OffloadPipelineStagedTest : public ::testing::TestWithParam<DType> {};

TEST_P(OffloadPipelineStagedTest, NormAndAdamWReadTheStagingWithTheBitsOfTheFp32Route) {
  const DType dtype = GetParam();
  device::TestDevice device;
  const std::vector<size_t> buckets = {70000, 3, 200001, 40000};  // received: once, twice, once, never
  size_t total = 0;
  for (size_t b : buckets) total += b;
  TwoSources sources = TwoSources::Make(device, dtype, total, 11);
  device::Buffer* src1 = &sources.g1;
  device::Buffer* src2 = &sources.g2;
  ASSERT_FALSE(src1->empty() || src2->empty());
  OffloadPipelineOptions o;
  o.shard_numel = total;
  o.param_dtype = dtype;
  o.threads = 3;
  std::vector<std::unique_ptr<OffloadPipeline>> p;  // [0] reads the staging, [1] the fp32 route
  for (int k = 0; k < 2; ++k) {
    auto made = OffloadPipeline::Create(&device, o);
    ASSERT_TRUE(made.ok()) << made.status();
    p.push_back(std::move(*made));
    std::mt19937 rng(5);  // the same weights and moments in both
    for (size_t i = 0; i < total; ++i) {
      p[k]->master()[i] = static_cast<float>(rng() % 1000) * 1e-3f;
      p[k]->exp_avg()[i] = 0.0f;
      p[k]->exp_avg_sq()[i] = 0.0f;
    }
    p[k]->ZeroGradients(0);
    const size_t offsets[] = {0, buckets[0], buckets[0] + buckets[1]};
    ASSERT_TRUE(p[k]->ReceiveGradient(0, offsets[0], buckets[0], src1->at(0), true).ok());
    ASSERT_TRUE(p[k]->ReceiveGradient(0, offsets[1], buckets[1], src1->at(offsets[1] * 2), false).ok());
    ASSERT_TRUE(p[k]->ReceiveGradient(0, offsets[1], buckets[1], src2->at(offsets[1] * 2), true).ok());
    ASSERT_TRUE(p[k]->ReceiveGradient(0, offsets[2], buckets[2], src2->at(offsets[2] * 2), true).ok());
    ASSERT_TRUE(p[k]->WaitGradients(absl::Seconds(60)).ok());
    EXPECT_EQ(p[k]->converted_elements(0), buckets[1]);
  }
  p[1]->gradients(0);  // everything in fp32 from here on: what Update read before the staging
  EXPECT_EQ(p[0]->converted_elements(0), buckets[1]) << "the norm and AdamW converted nothing";
  const double staged_norm = p[0]->SumOfSquares(0), fp32_norm = p[1]->SumOfSquares(0);
  EXPECT_EQ(std::memcmp(&staged_norm, &fp32_norm, sizeof(double)), 0) << staged_norm << " vs " << fp32_norm;
  double serial = 0.0;
  device::HostSumOfSquares(p[1]->gradients(0), total, &serial);
  EXPECT_EQ(std::memcmp(&fp32_norm, &serial, sizeof(double)), 0);
  // Two spans with different hyper-parameters, cutting across the staged and accumulated buckets.
  std::vector<OffloadPipeline::Span> spans(2);
  spans[0].offset = 0;
  spans[0].numel = buckets[0] + 2;
  spans[0].hyper.weight_decay = 0.0f;
  spans[1].offset = spans[0].numel;
  spans[1].numel = total - spans[0].numel;
  for (int step = 1; step <= 2; ++step) {
    for (auto& q : p) q->Update(spans, 0, step, 0.5f, nullptr, 0);
  }
  for (float* (OffloadPipeline::*state)() :
       {&OffloadPipeline::master, &OffloadPipeline::exp_avg, &OffloadPipeline::exp_avg_sq}) {
    EXPECT_EQ(std::memcmp(((*p[0]).*state)(), ((*p[1]).*state)(), total * sizeof(float)), 0);
  }
  EXPECT_EQ(std::memcmp(p[0]->host_params(), p[1]->host_params(), total * 2), 0);
  // What stayed staged, converted at last, is the fp32 gradient of the other.
  EXPECT_EQ(std::memcmp(p[0]->gradients(0), p[1]->gradients(0), total * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(HalfDtypes, OffloadPipelineStagedTest,
                         ::testing::Values(DType::kBFloat16, DType::kFloat16),
                         [](const auto& info) { return std::string(core::DTypeName(info.param)); });

// Moments the pipeline does not own (OffloadPipelineOptions::own_moments false), as the offload updater's
// 8-bit store gives them: two 8-bit spans and an fp32 one between them. Staged ranges that start or end
// inside an 8-bit span's block are converted to fp32 by Update (an 8-bit block is updated whole); one that
// covers whole blocks, or an fp32 span, is read where it lies. Against a twin pipeline whose gradient is
// all fp32 first, and against the serial CpuAdamW8bit / scalar oracle on that gradient: bit for bit.
struct ExternalMoments {
  std::vector<uint8_t> mq, vq;
  std::vector<float> ms, vs, m32, v32;
  ExternalMoments(size_t total, size_t fp32_numel, const optim::AdamW8bitMaps& maps)
      : mq(total),
        vq(total),
        ms(optim::QuantBlocks(total)),
        vs(optim::QuantBlocks(total)),
        m32(fp32_numel, 0.0f),
        v32(fp32_numel, 0.0f) {
    const std::vector<float> zeros(total, 0.0f);  // quantised zeros (code 0 of the signed map is not 0)
    optim::Quantize(maps.m, zeros.data(), total, mq.data(), ms.data());
    optim::Quantize(maps.v, zeros.data(), total, vq.data(), vs.data());
  }
  optim::Moments8bit At(size_t offset) {
    return {mq.data() + offset, vq.data() + offset, ms.data() + offset / optim::kQuantBlock,
            vs.data() + offset / optim::kQuantBlock};
  }
};

TEST(OffloadPipeline8bitTest, EightBitSpansUpdateWholeBlocksWhereverTheGradientLies) {
  const DType dtype = DType::kBFloat16;
  const optim::HostAdamW8bitMaps host_maps;
  device::TestDevice device;
  constexpr size_t kTotal = 4828;  // 8-bit [0, 2560) and [3328, 4828), fp32 [2560, 3260), padding between
  // Receives: [0, 1000) once, [1000, 1003) twice, [1003, 3328) once, [3328, 4100) once, [4100, 4828) never.
  TwoSources sources = TwoSources::Make(device, dtype, kTotal, 21);
  device::Buffer* src1 = &sources.g1;
  device::Buffer* src2 = &sources.g2;
  ASSERT_FALSE(src1->empty() || src2->empty());
  OffloadPipelineOptions o;
  o.shard_numel = kTotal;
  o.param_dtype = dtype;
  o.threads = 3;
  o.own_moments = false;
  std::vector<std::unique_ptr<OffloadPipeline>> p;  // [0] reads the staging, [1] the fp32 route
  std::vector<ExternalMoments> moments(2, ExternalMoments(kTotal, 700, host_maps.view()));
  std::vector<std::vector<OffloadPipeline::Span>> spans(2, std::vector<OffloadPipeline::Span>(3));
  for (int k = 0; k < 2; ++k) {
    auto made = OffloadPipeline::Create(&device, o);
    ASSERT_TRUE(made.ok()) << made.status();
    p.push_back(std::move(*made));
    EXPECT_EQ(p[k]->exp_avg(), nullptr);
    for (size_t i = 0; i < kTotal; ++i) p[k]->master()[i] = i < 3260 || i >= 3328 ? 0.01f * (i % 37) : 0.0f;
    spans[k][0].offset = 0;
    spans[k][0].numel = 2560;
    spans[k][0].q8 = moments[k].At(0);
    spans[k][1].offset = 2560;
    spans[k][1].numel = 700;
    spans[k][1].hyper.weight_decay = 0.0f;
    spans[k][1].m = moments[k].m32.data();
    spans[k][1].v = moments[k].v32.data();
    spans[k][2].offset = 3328;
    spans[k][2].numel = 1500;
    spans[k][2].q8 = moments[k].At(3328);
    p[k]->ZeroGradients(0);
    ASSERT_TRUE(p[k]->ReceiveGradient(0, 0, 1000, src1->at(0), true).ok());
    ASSERT_TRUE(p[k]->ReceiveGradient(0, 1000, 3, src1->at(2000), false).ok());
    ASSERT_TRUE(p[k]->ReceiveGradient(0, 1000, 3, src2->at(2000), true).ok());
    ASSERT_TRUE(p[k]->ReceiveGradient(0, 1003, 2325, src1->at(2006), true).ok());
    ASSERT_TRUE(p[k]->ReceiveGradient(0, 3328, 772, src2->at(6656), true).ok());
    ASSERT_TRUE(p[k]->WaitGradients(absl::Seconds(60)).ok());
  }
  std::vector<float> grad(p[1]->gradients(0), p[1]->gradients(0) + kTotal);  // all fp32 from here on
  p[0]->Update(spans[0], 0, 1, 0.5f, nullptr, 0);
  p[1]->Update(spans[1], 0, 1, 0.5f, nullptr, 0);
  // Converted: the twice-received bucket's first receive, then by Update the staged ranges that end or
  // start inside an 8-bit block: [0, 1000), [1003, 2560) of the next, [3328, 4100).
  EXPECT_EQ(p[0]->converted_elements(0), 3u + 1000u + 1557u + 772u);
  EXPECT_EQ(std::memcmp(p[0]->master(), p[1]->master(), kTotal * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(p[0]->host_params(), p[1]->host_params(), kTotal * 2), 0);
  EXPECT_EQ(moments[0].mq, moments[1].mq);
  EXPECT_EQ(moments[0].vq, moments[1].vq);
  EXPECT_EQ(moments[0].ms, moments[1].ms);
  EXPECT_EQ(moments[0].vs, moments[1].vs);
  EXPECT_EQ(moments[0].m32, moments[1].m32);
  EXPECT_EQ(moments[0].v32, moments[1].v32);
  // The serial oracles on the fp32 gradient.
  std::vector<float> master(kTotal);
  for (size_t i = 0; i < kTotal; ++i) master[i] = i < 3260 || i >= 3328 ? 0.01f * (i % 37) : 0.0f;
  ExternalMoments serial(kTotal, 700, host_maps.view());
  for (const auto& [at, n] : {std::pair<size_t, size_t>{0, 2560}, {3328, 1500}}) {
    optim::AdamW8bitSpans q;
    q.param = master.data() + at;
    q.grad = grad.data() + at;
    const optim::Moments8bit mm = serial.At(at);
    q.m = mm.m;
    q.v = mm.v;
    q.m_absmax = mm.m_absmax;
    q.v_absmax = mm.v_absmax;
    q.n = n;
    optim::CpuAdamW8bit(q, host_maps.view(), spans[1][0].hyper, 1, 0.5f);
  }
  optim::CpuAdamWScalar(master.data() + 2560, grad.data() + 2560, serial.m32.data(), serial.v32.data(), 700,
                        spans[1][1].hyper, 1, 0.5f);
  EXPECT_EQ(std::memcmp(p[1]->master(), master.data(), kTotal * sizeof(float)), 0);
  EXPECT_EQ(moments[1].mq, serial.mq);
  EXPECT_EQ(moments[1].ms, serial.ms);
  EXPECT_EQ(moments[1].vs, serial.vs);
  EXPECT_EQ(moments[1].m32, serial.m32);
}

// Host memory, as the planner counts it (planner/memory_model.cc: 16 B + 2 x 2 B a shard element in bf16,
// and 4 + 2 B more with the delayed update's second gradient buffer).
TEST(OffloadPipelineMemoryTest, HostBytesAreWhatThePlannerCounts) {
  device::TestDevice device;
  for (int buffers : {1, 2}) {
    OffloadPipelineOptions o;
    o.shard_numel = 1000;
    o.param_dtype = DType::kBFloat16;
    o.gradient_buffers = buffers;
    auto pipeline = OffloadPipeline::Create(&device, o);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    EXPECT_EQ((*pipeline)->host_bytes(), 1000u * (16 + 2 * 2 + (buffers - 1) * (4 + 2))) << buffers;
    o.own_moments = false;  // 8 B a shard element fewer: the moments are the caller's
    pipeline = OffloadPipeline::Create(&device, o);
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    EXPECT_EQ((*pipeline)->host_bytes(), 1000u * (8 + 2 * 2 + (buffers - 1) * (4 + 2))) << buffers;
    EXPECT_EQ((*pipeline)->pinned_bytes(), (*pipeline)->host_bytes()) << "all of it pinned";
  }
}

TEST(OffloadPipelineDeadlineTest, ACopyThatNeverLandsFailsTheWaitInsteadOfHanging) {
  device::TestDevice device;
  auto src = device.Allocate(1024 * 2, device::MemoryKind::kDevice);  // outlives the pipeline's copies
  ASSERT_TRUE(src.ok());
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
  // The first receive only copies (it stays in the staging); the second converts it first, in a job that
  // waits for that copy, and learns that it never landed before overwriting the staging.
  ASSERT_TRUE((*pipeline)->ReceiveGradient(0, 0, 1024, src->data(), true).ok());
  const absl::Status s = (*pipeline)->ReceiveGradient(0, 0, 1024, src->data(), true);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(std::string(s.message()).find("offload host job"), std::string::npos) << s;
  // Sticky: the gradients are incomplete, and every later wait says so.
  EXPECT_EQ((*pipeline)->WaitGradients(absl::Seconds(30)).code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace zerofit::offload
