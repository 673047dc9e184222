#include "tests/device/device_conformance.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <random>
#include <thread>

#include "core/dtype.h"
#include "device/device_factory.h"
#include "device/kernels.h"

namespace zerofit::device {
namespace {

using core::DType;

constexpr DType kFloatTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};

// A real GPU: the emulated one (tests/cuda_emulation) runs each CUDA thread as a host thread.
constexpr bool IsFastDevice(DeviceKind kind) {
#ifdef ZEROFIT_CUDA_EMULATION
  static_cast<void>(kind);
  return false;
#else
  return kind == DeviceKind::kCuda;
#endif
}

std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// `values` as raw bytes of type t (rounded to nearest even for 16-bit types).
std::vector<uint8_t> Encode(const std::vector<float>& values, DType t) {
  std::vector<uint8_t> out(values.size() * core::DTypeSize(t));
  core::ConvertElements(values.data(), DType::kFloat32, out.data(), t, values.size());
  return out;
}

// Values that exercise rounding: ties, subnormals of every type, overflow to inf, NaN, signed zeros.
std::vector<float> SpecialFloats() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          1.00390625f,  // bf16 tie (1 + 2^-8)
                          1.01171875f,  // bf16 tie, odd neighbour
                          1.00048828f,  // fp16 tie region (1 + 2^-11)
                          65504.0f,     // fp16 max
                          65519.0f,     // rounds to fp16 max
                          65520.0f,     // rounds to fp16 inf
                          1e-5f,        // fp16 subnormal
                          5.96e-8f,     // fp16 smallest subnormal
                          2.9e-8f,      // below half of it: zero
                          1e-40f,       // fp32 subnormal
                          3.0e38f,      // bf16 finite, fp16 inf
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min()};
  const std::vector<float> random = RandomFloats(1000, 7, 100.0f);
  v.insert(v.end(), random.begin(), random.end());
  return v;
}

std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> out(v.size());
  std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

std::string Label(DType t) { return core::DTypeName(t); }

// Units in the last place between two 16-bit floats of the same sign (bf16 and fp16 are both
// sign-magnitude, so adjacent values differ by one in their integer encoding).
int Ulps16(uint16_t a, uint16_t b) { return std::abs(static_cast<int>(a) - static_cast<int>(b)); }

}  // namespace

void DeviceConformance::SetUp() {
  DeviceOptions options;
  auto choice = ParseDeviceChoice(GetParam());
  ASSERT_TRUE(choice.ok()) << choice.status();
  options.choice = *choice;
  if (options.choice == DeviceChoice::kCuda && CudaDeviceCount() == 0) {
    GTEST_SKIP() << "no CUDA device visible (or this build has no CUDA device)";
  }
  options.test.max_delay = absl::Microseconds(100);
  auto device = CreateDevice(options);
  ASSERT_TRUE(device.ok()) << device.status();
  device_ = std::move(*device);
  auto stream = device_->CreateStream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  stream_ = std::move(*stream);
}

void DeviceConformance::TearDown() {
  if (stream_) {
    EXPECT_TRUE(stream_->Synchronize(absl::Seconds(60)).ok());
  }
  stream_.reset();
  device_.reset();
}

TEST_P(DeviceConformance, CopiesBetweenEveryKindOfMemory) {
  const size_t n = 4099;
  std::vector<uint8_t> src(n);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 31 + 7);
  auto pinned_in = device_->Allocate(n, MemoryKind::kPinned);
  auto pinned_out = device_->Allocate(n, MemoryKind::kPinned);
  auto d1 = device_->Allocate(n, MemoryKind::kDevice);
  auto d2 = device_->Allocate(n, MemoryKind::kDevice);
  ASSERT_TRUE(pinned_in.ok() && pinned_out.ok() && d1.ok() && d2.ok());
  std::memcpy(pinned_in->data(), src.data(), n);
  std::vector<uint8_t> pageable_out(n);

  ASSERT_TRUE(stream_->Copy(d1->data(), pinned_in->data(), n).ok());    // H2D from pinned
  ASSERT_TRUE(stream_->Copy(d2->data(), d1->data(), n).ok());           // D2D
  ASSERT_TRUE(stream_->Copy(pinned_out->data(), d2->data(), n).ok());   // D2H into pinned
  ASSERT_TRUE(stream_->Copy(pageable_out.data(), d2->data(), n).ok());  // D2H into pageable
  Sync();
  EXPECT_EQ(0, std::memcmp(pinned_out->data(), src.data(), n));
  EXPECT_EQ(pageable_out, src);

  Buffer from_pageable = Upload(src);  // H2D from pageable
  EXPECT_EQ(Download<uint8_t>(from_pageable, n), src);
  EXPECT_TRUE(stream_->Copy(d1->data(), d2->data(), 0).ok());  // empty copies are fine
}

TEST_P(DeviceConformance, AllocationsAreZeroedAndCounted) {
  const MemoryStats before = device_->memory_stats();
  {
    auto b = device_->Allocate(1 << 20, MemoryKind::kDevice);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->kind(), MemoryKind::kDevice);
    const std::vector<uint8_t> bytes = Download<uint8_t>(*b, 1 << 20);
    EXPECT_TRUE(std::all_of(bytes.begin(), bytes.end(), [](uint8_t x) { return x == 0; }));
    const MemoryStats during = device_->memory_stats();
    EXPECT_EQ(during.allocated_bytes, before.allocated_bytes + (1 << 20));
    EXPECT_GE(during.peak_allocated_bytes, during.allocated_bytes);
  }
  EXPECT_EQ(device_->memory_stats().allocated_bytes, before.allocated_bytes);
  if (device_->kind() == DeviceKind::kCuda) {
    const MemoryStats s = device_->memory_stats();
    EXPECT_GT(s.total_bytes, 0u);
    EXPECT_LE(s.free_bytes, s.total_bytes);
  }
}

// A training step reports the peak of its own window (worker/torch/train/training_backend.h): after a reset
// the high-water mark is what is allocated now, and grows again with the next allocation only.
TEST_P(DeviceConformance, ResetPeakMemoryStatsStartsANewWindow) {
  auto kept = device_->Allocate(1 << 16, MemoryKind::kDevice);
  ASSERT_TRUE(kept.ok()) << kept.status();
  {
    auto big = device_->Allocate(1 << 22, MemoryKind::kDevice);
    ASSERT_TRUE(big.ok()) << big.status();
  }
  const MemoryStats before = device_->memory_stats();
  EXPECT_GE(before.peak_allocated_bytes, before.allocated_bytes + (1 << 22));
  device_->ResetPeakMemoryStats();
  EXPECT_EQ(device_->memory_stats().peak_allocated_bytes, before.allocated_bytes);
  {
    auto small = device_->Allocate(1 << 18, MemoryKind::kDevice);
    ASSERT_TRUE(small.ok()) << small.status();
  }
  const MemoryStats after = device_->memory_stats();
  EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
  EXPECT_EQ(after.peak_allocated_bytes, before.allocated_bytes + (1 << 18));
}

TEST_P(DeviceConformance, Fill) {
  const size_t n = 10007;
  Buffer b = Upload(std::vector<uint8_t>(n, 1));
  ASSERT_TRUE(stream_->Fill(b.at(3), 0xAB, n - 5).ok());
  const std::vector<uint8_t> out = Download<uint8_t>(b, n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], i >= 3 && i < n - 2 ? 0xAB : 1) << i;
}

// Bit-identical to HostAccumulate for every source type, with scale 1 (exactly acc + src) and 0.5.
TEST_P(DeviceConformance, AccumulateMatchesHostReference) {
  const size_t n = 3 * 1024 + 5;
  for (DType t : kFloatTypes) {
    for (float scale : {1.0f, 0.5f, -3.25f}) {
      SCOPED_TRACE(Label(t) + " scale " + std::to_string(scale));
      const std::vector<uint8_t> src = Encode(RandomFloats(n, 1, 4.0f), t);
      std::vector<float> expected = RandomFloats(n, 2);
      Buffer d_src = Upload(src);
      Buffer d_acc = Upload(expected);
      HostAccumulate(src.data(), t, expected.data(), n, scale);
      ASSERT_TRUE(stream_->Accumulate(d_src.data(), t, d_acc.as<float>(), n, scale).ok());
      EXPECT_EQ(Bits(Download<float>(d_acc, n)), Bits(expected));
    }
  }
}

// fp64 partial sums in a different order than the host's index order: equal to 1e-10 relative (the host's
// own sequential sum of 40M terms carries up to ~1e-12..1e-9 of rounding), and the same bits on every run.
TEST_P(DeviceConformance, SumOfSquaresMatchesHostReference) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{(1 << 20) + 3}, size_t{40'000'000}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    if (n > (1 << 22) && !IsFastDevice(device_->kind())) continue;  // big only where it is fast
    const std::vector<float> src = RandomFloats(n, 3, 2.0f);
    double expected = 0;
    HostSumOfSquares(src.data(), n, &expected);
    Buffer d_src = Upload(src);
    Buffer d_out = Upload(std::vector<double>{-1.0});
    ASSERT_TRUE(stream_->SumOfSquares(d_src.as<float>(), core::DType::kFloat32, n, d_out.as<double>()).ok());
    const double first = Download<double>(d_out, 1)[0];
    EXPECT_NEAR(first, expected, 1e-10 * expected);
    ASSERT_TRUE(stream_->SumOfSquares(d_src.as<float>(), core::DType::kFloat32, n, d_out.as<double>()).ok());
    const double second = Download<double>(d_out, 1)[0];
    EXPECT_EQ(std::memcmp(&first, &second, sizeof(double)), 0) << "not deterministic";
  }
}

// A bf16 or fp16 source gives the bits of the same device's sum over its exact fp32 widening (the updater
// reads a single micro-batch's reduced shard in the parameter dtype: DeviceShardUpdater), on every device.
TEST_P(DeviceConformance, SumOfSquaresOfHalfTypesIsTheSumOfTheirWidening) {
  const size_t n = (1 << 18) + 7;
  for (DType t : kFloatTypes) {
    SCOPED_TRACE(Label(t));
    const std::vector<uint8_t> src = Encode(RandomFloats(n, 5, 3.0f), t);
    std::vector<float> widened(n);
    core::ConvertElements(src.data(), t, widened.data(), DType::kFloat32, n);
    Buffer d_src = Upload(src);
    Buffer d_wide = Upload(widened);
    Buffer d_out = Upload(std::vector<double>{-1.0, -1.0});
    ASSERT_TRUE(stream_->SumOfSquares(d_src.data(), t, n, d_out.as<double>()).ok());
    ASSERT_TRUE(stream_->SumOfSquares(d_wide.as<float>(), DType::kFloat32, n, d_out.as<double>() + 1).ok());
    const std::vector<double> out = Download<double>(d_out, 2);
    EXPECT_EQ(std::memcmp(&out[0], &out[1], sizeof(double)), 0) << out[0] << " against " << out[1];
    EXPECT_GT(out[0], 0.0);
  }
}

// Every pair of fp32/bf16/fp16 (same-type pairs are copies), bit-identical to core::ConvertElements,
// including ties, subnormals, overflow to infinity and NaN.
TEST_P(DeviceConformance, ConvertEveryPairMatchesHostReference) {
  const std::vector<float> values = SpecialFloats();
  const size_t n = values.size();
  for (DType from : kFloatTypes) {
    for (DType to : kFloatTypes) {
      SCOPED_TRACE(Label(from) + " -> " + Label(to));
      const std::vector<uint8_t> src = Encode(values, from);
      std::vector<uint8_t> expected(n * core::DTypeSize(to));
      HostConvert(src.data(), from, expected.data(), to, n);
      Buffer d_src = Upload(src);
      Buffer d_dst = Upload(std::vector<uint8_t>(expected.size(), 0x5A));
      ASSERT_TRUE(stream_->Convert(d_src.data(), from, d_dst.data(), to, n).ok());
      EXPECT_EQ(Download<uint8_t>(d_dst, expected.size()), expected);
    }
  }
}

// Every one of the 65536 bf16 and fp16 encodings to fp32 and to the other 16-bit type, bit for bit.
TEST_P(DeviceConformance, ConvertEvery16BitPattern) {
  std::vector<uint16_t> all(1 << 16);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  Buffer d_src = Upload(all);
  for (DType from : {DType::kBFloat16, DType::kFloat16}) {
    for (DType to : kFloatTypes) {
      if (to == from) continue;
      SCOPED_TRACE(Label(from) + " -> " + Label(to));
      std::vector<uint8_t> expected(all.size() * core::DTypeSize(to));
      HostConvert(all.data(), from, expected.data(), to, all.size());
      Buffer d_dst = Upload(std::vector<uint8_t>(expected.size(), 0));
      ASSERT_TRUE(stream_->Convert(d_src.data(), from, d_dst.data(), to, all.size()).ok());
      EXPECT_EQ(Download<uint8_t>(d_dst, expected.size()), expected);
    }
  }
}

// AdamW against the CPU oracle: fp32 param, m and v within 1e-6 relative (the CUDA kernel uses the same
// operations in the same order with IEEE-rounded intrinsics, so it is expected to be bit-identical), and the
// bf16/fp16 param_out within 1 ulp of the host's (one rounding of a value that is at most 1e-6 apart).
TEST_P(DeviceConformance, AdamWMatchesHostReference) {
  const size_t n = 4096 + 13;
  const DType out_types[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};
  for (DType grad_type : kFloatTypes) {
    for (int out = -1; out < 3; ++out) {
      for (int64_t step : {int64_t{1}, int64_t{10}}) {
        const bool has_out = out >= 0;
        const DType out_type = has_out ? out_types[out] : DType::kFloat32;
        SCOPED_TRACE("grad " + Label(grad_type) + " out " + (has_out ? Label(out_type) : "none") + " step " +
                     std::to_string(step));
        std::vector<float> param = RandomFloats(n, 11);
        std::vector<float> m = RandomFloats(n, 12, 0.1f);
        std::vector<float> v = RandomFloats(n, 13, 0.01f);
        for (float& x : v) x = std::abs(x);
        const std::vector<uint8_t> grad = Encode(RandomFloats(n, 14, 3.0f), grad_type);
        Buffer d_param = Upload(param), d_m = Upload(m), d_v = Upload(v), d_grad = Upload(grad);
        Buffer d_out = Upload(std::vector<uint8_t>(n * core::DTypeSize(out_type), 0));
        std::vector<uint8_t> host_out(n * core::DTypeSize(out_type));

        AdamWArgs a;
        a.spans.grad_dtype = grad_type;
        a.spans.n = n;
        a.spans.out_dtype = out_type;
        a.hyper.lr = 3e-4f;
        a.hyper.weight_decay = 0.01f;
        a.step = step;
        a.grad_scale = 0.5f;
        AdamWArgs h = a;
        h.spans.param = param.data();
        h.spans.grad = grad.data();
        h.spans.m = m.data();
        h.spans.v = v.data();
        h.spans.param_out = has_out ? host_out.data() : nullptr;
        HostAdamW(h);
        a.spans.param = d_param.as<float>();
        a.spans.grad = d_grad.data();
        a.spans.m = d_m.as<float>();
        a.spans.v = d_v.as<float>();
        a.spans.param_out = has_out ? d_out.data() : nullptr;
        ASSERT_TRUE(stream_->AdamW(a).ok());

        const auto check = [&](const Buffer& d, const std::vector<float>& expected, const char* what) {
          const std::vector<float> got = Download<float>(d, n);
          for (size_t i = 0; i < n; ++i) {
            ASSERT_NEAR(got[i], expected[i], 1e-6 * std::abs(expected[i]) + 1e-30) << what << "[" << i << "]";
          }
        };
        check(d_param, param, "param");
        check(d_m, m, "m");
        check(d_v, v, "v");
        if (!has_out) continue;
        const std::vector<uint8_t> got = Download<uint8_t>(d_out, host_out.size());
        if (out_type == DType::kFloat32) {
          std::vector<float> got_f(n), want_f(n);
          std::memcpy(got_f.data(), got.data(), got.size());
          std::memcpy(want_f.data(), host_out.data(), host_out.size());
          for (size_t i = 0; i < n; ++i) ASSERT_NEAR(got_f[i], want_f[i], 1e-6 * std::abs(want_f[i])) << i;
        } else {
          std::vector<uint16_t> got16(n), want16(n);
          std::memcpy(got16.data(), got.data(), got.size());
          std::memcpy(want16.data(), host_out.data(), host_out.size());
          for (size_t i = 0; i < n; ++i)
            ASSERT_LE(Ulps16(got16[i], want16[i]), 1) << "param_out[" << i << "]";
        }
      }
    }
  }
}

// The 8-bit blockwise AdamW against the host reference, over blocks of both maps and a partial last block:
// codes, block scales and parameters bit-identical (the CUDA kernel runs the same operations in the same
// order and the same nearest-code search; a block's max does not depend on the order it is taken in).
TEST_P(DeviceConformance, AdamW8bitMatchesHostReference) {
  const size_t n = 5 * optim::kQuantBlock + 37;
  const optim::HostAdamW8bitMaps maps;
  const std::vector<float> map_codes = maps.Concatenated();
  for (DType grad_type : kFloatTypes) {
    SCOPED_TRACE("grad " + Label(grad_type));
    std::vector<float> param = RandomFloats(n, 21);
    std::vector<float> m = RandomFloats(n, 22, 0.1f), v = RandomFloats(n, 23, 0.01f);
    for (float& x : v) x = x * x;
    std::vector<uint8_t> mq(n), vq(n);
    std::vector<float> ma(optim::QuantBlocks(n)), va(optim::QuantBlocks(n));
    optim::Quantize(maps.m.data(), m.data(), n, mq.data(), ma.data());
    optim::Quantize(maps.v.data(), v.data(), n, vq.data(), va.data());
    const std::vector<uint8_t> grad = Encode(RandomFloats(n, 24, 3.0f), grad_type);
    Buffer d_param = Upload(param), d_grad = Upload(grad), d_mq = Upload(mq), d_vq = Upload(vq);
    Buffer d_ma = Upload(ma), d_va = Upload(va), d_maps = Upload(map_codes);
    Buffer d_out = Upload(std::vector<uint16_t>(n, 0));
    std::vector<uint16_t> host_out(n);

    AdamW8bitArgs a;
    a.spans.grad_dtype = grad_type;
    a.spans.n = n;
    a.spans.out_dtype = DType::kBFloat16;
    a.hyper.lr = 3e-4f;
    a.hyper.weight_decay = 0.01f;
    a.step = 7;
    a.grad_scale = 0.5f;
    AdamW8bitArgs h = a;
    h.spans.param = param.data();
    h.spans.grad = grad.data();
    h.spans.m = mq.data();
    h.spans.v = vq.data();
    h.spans.m_absmax = ma.data();
    h.spans.v_absmax = va.data();
    h.spans.param_out = host_out.data();
    h.maps = maps.view();
    HostAdamW8bit(h);
    a.spans.param = d_param.as<float>();
    a.spans.grad = d_grad.data();
    a.spans.m = d_mq.as<uint8_t>();
    a.spans.v = d_vq.as<uint8_t>();
    a.spans.m_absmax = d_ma.as<float>();
    a.spans.v_absmax = d_va.as<float>();
    a.spans.param_out = d_out.data();
    a.maps = optim::AdamW8bitMaps{d_maps.as<float>(), d_maps.as<float>() + optim::kMapCodes};
    ASSERT_TRUE(stream_->AdamW8bit(a).ok());
    EXPECT_EQ(Bits(Download<float>(d_param, n)), Bits(param));
    EXPECT_EQ(Download<uint8_t>(d_mq, n), mq);
    EXPECT_EQ(Download<uint8_t>(d_vq, n), vq);
    EXPECT_EQ(Bits(Download<float>(d_ma, ma.size())), Bits(ma));
    EXPECT_EQ(Bits(Download<float>(d_va, va.size())), Bits(va));
    EXPECT_EQ(Download<uint16_t>(d_out, n), host_out);
  }
}

// Work on stream b that waits for an event recorded on stream a sees everything a did before the Record.
TEST_P(DeviceConformance, EventOrdersTwoStreams) {
  auto other = device_->CreateStream();
  auto event = device_->CreateEvent();
  ASSERT_TRUE(other.ok() && event.ok());
  const size_t n = 1 << 16;
  Buffer data = Upload(std::vector<float>(n, 0.0f));
  Buffer copy = Upload(std::vector<float>(n, 0.0f));
  const std::vector<float> ones(n, 1.0f);
  Buffer d_ones = Upload(ones);
  for (int round = 1; round <= 8; ++round) {
    // a: data += 1 (several kernels, so that it takes a while); b: copy = data once a is done.
    for (int k = 0; k < 4; ++k) {
      ASSERT_TRUE(stream_->Accumulate(d_ones.data(), DType::kFloat32, data.as<float>(), n, 0.25f).ok());
    }
    ASSERT_TRUE((*event)->Record(*stream_).ok());
    ASSERT_TRUE((*event)->Wait(**other).ok());
    ASSERT_TRUE((*other)->Copy(copy.data(), data.data(), n * sizeof(float)).ok());
    ASSERT_TRUE((*other)->Synchronize(absl::Seconds(60)).ok());
    const std::vector<float> got = Download<float>(copy, n);
    for (size_t i = 0; i < n; i += 997) ASSERT_EQ(got[i], static_cast<float>(round)) << "round " << round;
  }
  EXPECT_TRUE((*event)->Query());
  EXPECT_TRUE((*event)->Synchronize(absl::Seconds(1)).ok());
}

TEST_P(DeviceConformance, EventsWorkWithTheComputeStream) {
  auto event = device_->CreateEvent();
  ASSERT_TRUE(event.ok());
  Buffer data = Upload(std::vector<float>(1024, 0.0f));
  Buffer out = Upload(std::vector<float>(1024, 0.0f));
  ASSERT_TRUE(device_->compute_stream().Fill(data.data(), 0x3F, data.bytes()).ok());
  ASSERT_TRUE((*event)->Record(device_->compute_stream()).ok());
  ASSERT_TRUE((*event)->Wait(*stream_).ok());
  ASSERT_TRUE(stream_->Copy(out.data(), data.data(), data.bytes()).ok());
  const std::vector<uint8_t> got = Download<uint8_t>(out, out.bytes());
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](uint8_t x) { return x == 0x3F; }));
  EXPECT_TRUE(device_->compute_stream().Synchronize(absl::Seconds(60)).ok());
}

TEST_P(DeviceConformance, HostFunctionsRunInStreamOrder) {
  std::mutex mu;
  std::vector<int> order;
  Buffer b = Upload(std::vector<float>(256, 0.0f));
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(stream_
                    ->HostFunc([&, i] {
                      std::lock_guard<std::mutex> lock(mu);
                      order.push_back(i);
                      return absl::OkStatus();
                    })
                    .ok());
    ASSERT_TRUE(stream_->Fill(b.data(), static_cast<uint8_t>(i), b.bytes()).ok());
  }
  Sync();
  std::vector<int> expected(20);
  for (int i = 0; i < 20; ++i) expected[i] = i;
  EXPECT_EQ(order, expected);
}

// A failing host function breaks the stream: Synchronize and status() report its (first) error, and the
// stream still runs what follows.
TEST_P(DeviceConformance, HostFunctionErrorBreaksTheStream) {
  std::atomic<int> ran{0};
  ASSERT_TRUE(stream_->HostFunc([] { return absl::DataLossError("first failure"); }).ok());
  ASSERT_TRUE(stream_->HostFunc([] { return absl::InternalError("second failure"); }).ok());
  ASSERT_TRUE(stream_->HostFunc([&] { return ++ran, absl::OkStatus(); }).ok());
  const absl::Status s = stream_->Synchronize(absl::Seconds(60));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(stream_->status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ran.load(), 1);
  stream_.reset();  // broken: TearDown must not expect it to be OK
}

// Synchronize never blocks past its deadline: a host function that holds the stream makes both the
// stream's and an event's Synchronize return DeadlineExceeded, and they succeed once it is released.
TEST_P(DeviceConformance, SynchronizeHonoursItsDeadline) {
  if (device_->kind() == DeviceKind::kHost) GTEST_SKIP() << "the host device runs every operation inline";
  std::atomic<bool> release{false};
  auto event = device_->CreateEvent();
  ASSERT_TRUE(event.ok());
  ASSERT_TRUE(stream_
                  ->HostFunc([&] {
                    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_TRUE((*event)->Record(*stream_).ok());
  const absl::Time start = absl::Now();
  EXPECT_EQ(stream_->Synchronize(absl::Milliseconds(50)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ((*event)->Synchronize(absl::Milliseconds(50)).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE((*event)->Query());
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(stream_->status().ok()) << "a slow stream is not a broken one";
  release = true;
  EXPECT_TRUE(stream_->Synchronize(absl::Seconds(60)).ok());
  EXPECT_TRUE((*event)->Synchronize(absl::Seconds(60)).ok());
  EXPECT_TRUE((*event)->Query());
}

// A timing event says when the stream ran the work, not when the host enqueued it: two markings around a
// host function that sleeps 20 ms are at least that far apart, read either way round.
TEST_P(DeviceConformance, TimingEventsMeasureWhenTheStreamRanTheWork) {
  auto begin = device_->CreateTimingEvent();
  auto end = device_->CreateTimingEvent();
  auto plain = device_->CreateEvent();
  ASSERT_TRUE(begin.ok() && end.ok() && plain.ok());
  EXPECT_EQ((*end)->MillisecondsSince(**begin).status().code(), absl::StatusCode::kFailedPrecondition)
      << "neither was recorded";
  ASSERT_TRUE((*begin)->Record(*stream_).ok());
  ASSERT_TRUE(stream_
                  ->HostFunc([] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(20));
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_TRUE((*end)->Record(*stream_).ok());
  ASSERT_TRUE((*plain)->Record(*stream_).ok());
  Sync();
  absl::StatusOr<double> ms = (*end)->MillisecondsSince(**begin);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GE(*ms, 19.5) << "the 20 ms host function ran between the markings (0.5 ms for the clocks' grain)";
  absl::StatusOr<double> back = (*begin)->MillisecondsSince(**end);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_NEAR(*back, -*ms, 1e-3);
  EXPECT_EQ((*plain)->MillisecondsSince(**begin).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*end)->MillisecondsSince(**plain).status().code(), absl::StatusCode::kInvalidArgument);
}

// A marking the stream has not reached has no time yet: FailedPrecondition, then the time once it ran.
TEST_P(DeviceConformance, TimingEventsHaveNoTimeBeforeTheStreamGetsThere) {
  if (device_->kind() == DeviceKind::kHost) GTEST_SKIP() << "the host device runs every operation inline";
  std::atomic<bool> release{false};
  auto begin = device_->CreateTimingEvent();
  auto end = device_->CreateTimingEvent();
  ASSERT_TRUE(begin.ok() && end.ok());
  ASSERT_TRUE((*begin)->Record(*stream_).ok());
  ASSERT_TRUE(stream_
                  ->HostFunc([&] {
                    const absl::Time deadline = absl::Now() + absl::Seconds(60);
                    while (!release.load() && absl::Now() < deadline) {
                      std::this_thread::sleep_for(std::chrono::milliseconds(1));
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_TRUE((*end)->Record(*stream_).ok());
  EXPECT_EQ((*end)->MillisecondsSince(**begin).status().code(), absl::StatusCode::kFailedPrecondition);
  release = true;
  Sync();
  absl::StatusOr<double> ms = (*end)->MillisecondsSince(**begin);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GE(*ms, 0.0);
}

}  // namespace zerofit::device
