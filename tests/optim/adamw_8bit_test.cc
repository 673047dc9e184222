// The 8-bit blockwise AdamW (optim/adamw_8bit.h) and its dynamic map (optim/dynamic_map.h): the map's shape
// as bitsandbytes' create_dynamic_map defines it, quantisation to the nearest code against a brute-force
// search in double, the error within half a code gap, a restored scale giving back the same codes, one step
// equal to its parts (dequantise, the fp32 AdamW oracle that equals torch's AdamW, quantise), and many steps
// converging as fp32 AdamW does.
#include "optim/adamw_8bit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "nlohmann/json.hpp"
#include "optim/cpu_adamw.h"
#include "optim/dynamic_map.h"

namespace zerofit::optim {
namespace {

TEST(DynamicMapTest, SignedMapHasBitsandbytesShape) {
  const DynamicMap map = MakeDynamicMap(MapKind::kSigned);
  EXPECT_TRUE(std::is_sorted(map.begin(), map.end()));
  EXPECT_EQ(std::adjacent_find(map.begin(), map.end()), map.end()) << "codes must be distinct";
  EXPECT_EQ(std::count_if(map.begin(), map.end(), [](float c) { return c < 0; }), 127);
  EXPECT_EQ(std::count(map.begin(), map.end(), 0.0f), 1);
  EXPECT_EQ(map[255], 1.0f);
  // Decade i (0..6) holds 2^i positive codes in [0.1, 1) x 10^(i-6): the smallest is 10^-6 x (0.1 + 1) / 2.
  EXPECT_FLOAT_EQ(map[128], 5.5e-7f);
  for (int i = 0; i < 7; ++i) {
    const double lo = 0.1 * std::pow(10.0, i - 6), hi = std::pow(10.0, i - 6);
    EXPECT_EQ(std::count_if(map.begin(), map.end(), [&](float c) { return c >= lo && c < hi; }), 1 << i) << i;
  }
  // The most negative code is the mean of linspace(0.1, 1, 65)'s last two points: not -1.
  EXPECT_FLOAT_EQ(map[0], -(1.0f + (1.0f - 0.9f / 64)) / 2);
}

TEST(DynamicMapTest, UnsignedMapSpendsEveryCodeOnZeroToOne) {
  const DynamicMap map = MakeDynamicMap(MapKind::kUnsigned);
  EXPECT_TRUE(std::is_sorted(map.begin(), map.end()));
  EXPECT_EQ(std::adjacent_find(map.begin(), map.end()), map.end());
  EXPECT_EQ(map[0], 0.0f);
  EXPECT_EQ(map[255], 1.0f);
  EXPECT_FLOAT_EQ(map[1], 0.325e-6f);  // linspace(0.1, 1, 3)'s first midpoint x 10^-6
  for (int i = 0; i < 7; ++i) {
    const double lo = 0.1 * std::pow(10.0, i - 6), hi = std::pow(10.0, i - 6);
    EXPECT_EQ(std::count_if(map.begin(), map.end(), [&](float c) { return c >= lo && c < hi; }), 2 << i) << i;
  }
}

// Both maps bit for bit against torch's: tests/optim/golden/dynamic_map.json, written by
// scripts/make_dynamic_map_golden.py with torch (bitsandbytes' create_dynamic_map as it is, on real
// torch.linspace). Skipped, saying so, while no golden is in the tree (no machine here has torch).
TEST(DynamicMapTest, MapsEqualTorchsGolden) {
  std::ifstream in(ZEROFIT_DYNAMIC_MAP_GOLDEN);
  if (!in)
    GTEST_SKIP() << "no " << ZEROFIT_DYNAMIC_MAP_GOLDEN << " (scripts/make_dynamic_map_golden.py writes it)";
  const nlohmann::json golden = nlohmann::json::parse(in);
  for (const auto& [key, kind] :
       {std::pair{"signed", MapKind::kSigned}, std::pair{"unsigned", MapKind::kUnsigned}}) {
    const DynamicMap map = MakeDynamicMap(kind);
    const std::vector<uint32_t> want = golden.at(key).get<std::vector<uint32_t>>();
    ASSERT_EQ(want.size(), map.size()) << key;
    for (size_t k = 0; k < map.size(); ++k) {
      uint32_t got = 0;
      std::memcpy(&got, &map[k], sizeof(got));
      EXPECT_EQ(got, want[k]) << key << " code " << k << ": " << map[k];
    }
  }
}

// The code nearest to `scaled` by exhaustive search in double, ties to the lower index.
size_t BruteNearest(const DynamicMap& map, float scaled) {
  size_t best = 0;
  for (size_t k = 1; k < map.size(); ++k) {
    if (std::fabs(double{map[k]} - scaled) < std::fabs(double{map[best]} - scaled)) best = k;
  }
  return best;
}

TEST(DynamicMapTest, QuantisesToTheNearestCode) {
  for (MapKind kind : {MapKind::kSigned, MapKind::kUnsigned}) {
    const DynamicMap map = MakeDynamicMap(kind);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> exponent(-8.0f, 0.0f);
    for (int t = 0; t < 20000; ++t) {
      float x = std::pow(10.0f, exponent(rng));
      if (kind == MapKind::kSigned && t % 2) x = -x;
      const size_t got = NearestCode(map.data(), x), want = BruteNearest(map, x);
      // A value within an ulp of a midpoint may round either way between double and fp32 midpoints.
      if (got != want) {
        const double gap = std::fabs(std::fabs(double{map[got]} - x) - std::fabs(double{map[want]} - x));
        EXPECT_LE(gap, 4 * std::numeric_limits<float>::epsilon() * std::fabs(x)) << x;
      }
    }
    // Exact codes and midpoints: a code is its own nearest; a midpoint takes the lower code.
    for (size_t k = 0; k < map.size(); ++k) EXPECT_EQ(NearestCode(map.data(), map[k]), k);
    for (size_t k = 0; k + 1 < map.size(); ++k)
      EXPECT_EQ(NearestCode(map.data(), (map[k] + map[k + 1]) / 2), k);
  }
}

std::vector<float> RandomMoments(size_t n, bool is_signed, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const float mag = std::pow(10.0f, normal(rng) - 3.0f);
    x[i] = is_signed ? (normal(rng) < 0 ? -mag : mag) : mag * mag;
  }
  return x;
}

TEST(DynamicMapTest, BlocksKeepTheirScaleAndRestoreExactly) {
  for (MapKind kind : {MapKind::kSigned, MapKind::kUnsigned}) {
    const DynamicMap map = MakeDynamicMap(kind);
    const size_t n = 5 * kQuantBlock + 77;  // a partial last block
    const std::vector<float> x = RandomMoments(n, kind == MapKind::kSigned, 11);
    std::vector<uint8_t> codes(n), again(n);
    std::vector<float> absmax(QuantBlocks(n)), back(n);
    Quantize(map.data(), x.data(), n, codes.data(), absmax.data());
    Dequantize(map.data(), codes.data(), n, absmax.data(), back.data());
    for (size_t i = 0; i < n; ++i) {
      const size_t b = i / kQuantBlock, end = std::min(n, (b + 1) * kQuantBlock);
      EXPECT_EQ(absmax[b], BlockAbsMax(x.data() + b * kQuantBlock, end - b * kQuantBlock));
      // Within half the gap to the neighbouring codes (in units of the block's scale), plus rounding.
      const size_t c = codes[i];
      // Below the lowest code: down to -1 (signed: the map's lowest code is -0.993) or 0.
      const double floor = kind == MapKind::kSigned ? -1.0 : 0.0;
      const double lo = c > 0 ? (double{map[c]} - map[c - 1]) / 2 : map[0] - floor;
      const double hi = c < 255 ? (double{map[c + 1]} - map[c]) / 2 : 0;
      const double err = (double{x[i]} - back[i]) / absmax[b];
      EXPECT_LE(err, hi + 1e-6) << i;
      EXPECT_GE(err, -lo - 1e-6) << i;
    }
    // A checkpoint keeps the dequantised moments and the scales: quantising them again against the same
    // scales gives the same codes (recomputing the scale would not: the signed map has no -1).
    QuantizeWithScales(map.data(), back.data(), n, absmax.data(), again.data());
    EXPECT_EQ(again, codes);
  }
}

struct State8 {
  std::vector<float> p;
  std::vector<float> g;
  std::vector<uint8_t> m, v;
  std::vector<float> m_absmax, v_absmax;
  AdamW8bitSpans Spans() {
    AdamW8bitSpans s;
    s.param = p.data();
    s.grad = g.data();
    s.m = m.data();
    s.v = v.data();
    s.m_absmax = m_absmax.data();
    s.v_absmax = v_absmax.data();
    s.n = p.size();
    return s;
  }
};

State8 RandomState(size_t n, const AdamW8bitMaps& maps, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  State8 s;
  s.p.resize(n);
  s.g.resize(n);
  for (size_t i = 0; i < n; ++i) {
    s.p[i] = normal(rng);
    s.g[i] = i % 17 == 0 ? 0.0f : normal(rng) * 1e-2f;
  }
  const std::vector<float> m = RandomMoments(n, true, seed + 1), v = RandomMoments(n, false, seed + 2);
  s.m.resize(n);
  s.v.resize(n);
  s.m_absmax.resize(QuantBlocks(n));
  s.v_absmax.resize(QuantBlocks(n));
  Quantize(maps.m, m.data(), n, s.m.data(), s.m_absmax.data());
  Quantize(maps.v, v.data(), n, s.v.data(), s.v_absmax.data());
  return s;
}

const AdamWHyper kHyper{1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f};

TEST(AdamW8bitTest, OneStepIsDequantiseAdamWQuantise) {
  const HostAdamW8bitMaps host_maps;
  const AdamW8bitMaps maps = host_maps.view();
  const size_t n = 3 * kQuantBlock + 5;
  State8 s = RandomState(n, maps, 3);
  // The parts: dequantised moments, the fp32 oracle on them, the new moments quantised against their
  // blocks' new absmax.
  std::vector<float> p = s.p, m(n), v(n), out(n);
  Dequantize(maps.m, s.m.data(), n, s.m_absmax.data(), m.data());
  Dequantize(maps.v, s.v.data(), n, s.v_absmax.data(), v.data());
  CpuAdamWScalar(p.data(), s.g.data(), m.data(), v.data(), n, kHyper, 4, 0.5f);
  std::vector<uint8_t> mq(n), vq(n);
  std::vector<float> ma(QuantBlocks(n)), va(QuantBlocks(n));
  Quantize(maps.m, m.data(), n, mq.data(), ma.data());
  Quantize(maps.v, v.data(), n, vq.data(), va.data());

  AdamW8bitSpans spans = s.Spans();
  std::vector<uint16_t> bf16(n);
  spans.param_out = bf16.data();
  spans.out_dtype = core::DType::kBFloat16;
  CpuAdamW8bit(spans, maps, kHyper, 4, 0.5f);
  EXPECT_EQ(s.p, p);
  EXPECT_EQ(s.m, mq);
  EXPECT_EQ(s.v, vq);
  EXPECT_EQ(s.m_absmax, ma);
  EXPECT_EQ(s.v_absmax, va);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(core::LoadAsFloat(bf16.data(), core::DType::kBFloat16, i),
              core::Bf16ToFloat(core::FloatToBf16(p[i])));
  }
}

// Minimise 0.5 |x - target|^2 from 0 with 8-bit and with fp32 AdamW: the 8-bit run ends as close to the
// target as the fp32 one, within the lr-sized dither the quantised second moment allows.
TEST(AdamW8bitTest, ConvergesLikeFp32AdamW) {
  const HostAdamW8bitMaps host_maps;
  const AdamW8bitMaps maps = host_maps.view();
  const size_t n = 4 * kQuantBlock;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> target(n);
  for (float& t : target) t = normal(rng);
  State8 s;
  s.p.assign(n, 0.0f);
  s.g.assign(n, 0.0f);
  s.m.assign(n, 0);
  s.v.assign(n, 0);
  s.m_absmax.assign(QuantBlocks(n), 0.0f);
  s.v_absmax.assign(QuantBlocks(n), 0.0f);
  // Code 0 of the signed map is not zero: start from quantised zeros.
  Quantize(maps.m, s.p.data(), n, s.m.data(), s.m_absmax.data());
  Quantize(maps.v, s.p.data(), n, s.v.data(), s.v_absmax.data());
  std::vector<float> p32(n, 0.0f), m32(n, 0.0f), v32(n, 0.0f), g32(n);
  const AdamWHyper h{2e-2f, 0.9f, 0.999f, 1e-8f, 0.0f};
  for (int step = 1; step <= 600; ++step) {
    for (size_t i = 0; i < n; ++i) {
      s.g[i] = s.p[i] - target[i];
      g32[i] = p32[i] - target[i];
    }
    CpuAdamW8bit(s.Spans(), maps, h, step, 1.0f);
    CpuAdamWScalar(p32.data(), g32.data(), m32.data(), v32.data(), n, h, step, 1.0f);
    if (step == 50) {
      double d = 0;
      for (size_t i = 0; i < n; ++i) d = std::max(d, std::fabs(double{s.p[i]} - p32[i]));
      // The quantised moments move the path (no accidental fp32 state), by a few steps' worth.
      EXPECT_GT(d, 0.0);
      EXPECT_LT(d, 10 * h.lr);
    }
  }
  double err8 = 0, err32 = 0;
  for (size_t i = 0; i < n; ++i) {
    err8 = std::max(err8, std::fabs(double{s.p[i]} - target[i]));
    err32 = std::max(err32, std::fabs(double{p32[i]} - target[i]));
  }
  // Both started |target| <= ~4 away; AdamW's steps are about lr each near the optimum.
  EXPECT_LT(err32, 5 * h.lr);
  EXPECT_LT(err8, 5 * h.lr);
}

// CpuAdamW's 8-bit tasks: tiles of whole blocks across threads, beside an fp32 task in the same step, give
// the serial CpuAdamW8bit's bits (parameters, bf16 copy, codes, scales); the fp32 task is the scalar
// oracle's.
TEST(AdamW8bitTest, ThreadedTilesEqualTheSerialStep) {
  const HostAdamW8bitMaps host_maps;
  const AdamW8bitMaps maps = host_maps.view();
  const size_t n = 2 * CpuAdamW::kTileElements + 3 * kQuantBlock + 7;  // three tiles, a ragged block
  State8 serial = RandomState(n, maps, 11), tiled = serial;
  std::vector<uint16_t> bf16_serial(n), bf16_tiled(n);
  AdamW8bitSpans s = serial.Spans();
  s.param_out = bf16_serial.data();
  s.out_dtype = core::DType::kBFloat16;
  CpuAdamW8bit(s, maps, kHyper, 3, 0.25f);

  const size_t f = 1000;
  std::vector<float> p(f), g(f), m(f), v(f);
  for (size_t i = 0; i < f; ++i) {
    p[i] = std::sin(0.1f * i);
    g[i] = std::cos(0.3f * i);
    m[i] = 0.01f * std::cos(0.7f * i);
    v[i] = 1e-4f * (1.0f + std::sin(0.5f * i));
  }
  std::vector<float> p_ref = p, m_ref = m, v_ref = v;
  CpuAdamWScalar(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), f, kHyper, 3, 0.25f);

  auto adamw = CpuAdamW::Create(3, SimdLevel::kScalar);
  ASSERT_TRUE(adamw.ok()) << adamw.status();
  CpuAdamW::Task q;
  q.spans.param = tiled.p.data();
  q.spans.grad = tiled.g.data();
  q.spans.n = n;
  q.spans.param_out = bf16_tiled.data();
  q.spans.out_dtype = core::DType::kBFloat16;
  q.q8 = Moments8bit{tiled.m.data(), tiled.v.data(), tiled.m_absmax.data(), tiled.v_absmax.data()};
  q.hyper = kHyper;
  CpuAdamW::Task t;
  t.spans.param = p.data();
  t.spans.grad = g.data();
  t.spans.m = m.data();
  t.spans.v = v.data();
  t.spans.n = f;
  t.hyper = kHyper;
  std::atomic<size_t> done{0};
  (*adamw)->Step({q, t}, 3, 0.25f, [&](size_t task, size_t begin, size_t end) {
    if (task == 0) {
      EXPECT_EQ(begin % kQuantBlock, 0u);
    }
    done += end - begin;
  });
  EXPECT_EQ(done.load(), n + f);
  EXPECT_EQ(tiled.p, serial.p);
  EXPECT_EQ(bf16_tiled, bf16_serial);
  EXPECT_EQ(tiled.m, serial.m);
  EXPECT_EQ(tiled.v, serial.v);
  EXPECT_EQ(tiled.m_absmax, serial.m_absmax);
  EXPECT_EQ(tiled.v_absmax, serial.v_absmax);
  EXPECT_EQ(p, p_ref);
  EXPECT_EQ(m, m_ref);
  EXPECT_EQ(v, v_ref);
}

}  // namespace
}  // namespace zerofit::optim

namespace zerofit::optim {
namespace {

// The SIMD 8-bit kernels (AVX2, AVX-512) against the scalar oracle, bit for bit (codes, scales, parameters,
// the copy): random state with every gradient and copy dtype and a ragged last block; then, with beta1 = 0
// (the new m is the gradient itself), blocks whose m lands exactly on every midpoint of the signed map, one
// float either side of it, on +-0, -1 and NaN, against a block absmax of 1: the nearest-code rule at its
// ties. Each kernel only where the CPU runs it (skipped where none does).
class AdamW8bitSimdTest : public ::testing::TestWithParam<SimdLevel> {};

TEST_P(AdamW8bitSimdTest, KernelEqualsTheScalarOracle) {
  auto simd = AdamW8bitKernelFor(GetParam());
  if (!simd.ok()) GTEST_SKIP() << simd.status();
  const AdamW8bitKernel kernel = *simd;
  const HostAdamW8bitMaps host_maps;
  const AdamW8bitMaps maps = host_maps.view();
  const auto run_both = [&](State8 a, const AdamWHyper& h, core::DType out) {
    State8 b = a;
    std::vector<uint16_t> out_a(a.p.size()), out_b(a.p.size());
    AdamW8bitSpans sa = a.Spans(), sb = b.Spans();
    if (out != core::DType::kFloat32) {
      sa.param_out = out_a.data();
      sb.param_out = out_b.data();
      sa.out_dtype = sb.out_dtype = out;
    }
    CpuAdamW8bit(sa, maps, h, 7, 0.75f);
    kernel(sb, maps, h, 7, 0.75f);
    EXPECT_EQ(std::memcmp(a.p.data(), b.p.data(), a.p.size() * 4), 0);
    EXPECT_EQ(a.m, b.m);
    EXPECT_EQ(a.v, b.v);
    EXPECT_EQ(a.m_absmax, b.m_absmax);
    EXPECT_EQ(a.v_absmax, b.v_absmax);
    EXPECT_EQ(out_a, out_b);
  };
  for (core::DType out : {core::DType::kFloat32, core::DType::kBFloat16, core::DType::kFloat16}) {
    SCOPED_TRACE(core::DTypeName(out));
    run_both(RandomState(5 * kQuantBlock + 37, maps, 17), kHyper, out);
  }
  // Gradients as bf16 and fp16 (the staging's dtypes): the same values, read as such.
  for (core::DType g : {core::DType::kBFloat16, core::DType::kFloat16}) {
    State8 a = RandomState(3 * kQuantBlock + 5, maps, 19), b = a;
    std::vector<uint16_t> low(a.g.size());
    core::ConvertElements(a.g.data(), core::DType::kFloat32, low.data(), g, low.size());
    AdamW8bitSpans sa = a.Spans(), sb = b.Spans();
    sa.grad = sb.grad = low.data();
    sa.grad_dtype = sb.grad_dtype = g;
    CpuAdamW8bit(sa, maps, kHyper, 2, 1.0f);
    kernel(sb, maps, kHyper, 2, 1.0f);
    EXPECT_EQ(a.p, b.p) << core::DTypeName(g);
    EXPECT_EQ(a.m, b.m) << core::DTypeName(g);
    EXPECT_EQ(a.v_absmax, b.v_absmax) << core::DTypeName(g);
  }
  // The ties: m = g exactly (beta1 = 0, grad_scale 1), one 1.0 per block sets its absmax to 1.
  std::vector<float> x;
  for (size_t i = 0; i + 1 < kMapCodes; ++i) {
    const float mid = (host_maps.m[i] + host_maps.m[i + 1]) / 2.0f;
    x.insert(x.end(), {mid, std::nextafter(mid, -2.0f), std::nextafter(mid, 2.0f)});
  }
  x.insert(x.end(), {0.0f, -0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f});
  State8 ties = RandomState(0, maps, 1);
  for (size_t i = 0; i < x.size(); ++i) {
    if (ties.g.size() % kQuantBlock == 0) ties.g.push_back(1.0f);
    ties.g.push_back(x[i]);
  }
  const size_t n = ties.g.size();
  ties.p.assign(n, 0.5f);
  ties.m.assign(n, 0);
  ties.v.assign(n, 0);
  ties.m_absmax.assign(QuantBlocks(n), 0.0f);
  ties.v_absmax.assign(QuantBlocks(n), 0.0f);
  const AdamWHyper zero_betas{1e-3f, 0.0f, 0.0f, 1e-8f, 0.0f};
  State8 scalar = ties;
  CpuAdamW8bit(scalar.Spans(), maps, zero_betas, 1, 1.0f);
  EXPECT_EQ(scalar.m_absmax[0], 1.0f) << "the block's absmax is its 1.0";
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(scalar.m[i], NearestCode(maps.m, ties.g[i])) << "the oracle's codes are NearestCode's";
  }
  run_both(ties, zero_betas, core::DType::kFloat32);
}

INSTANTIATE_TEST_SUITE_P(Kernels, AdamW8bitSimdTest, ::testing::Values(SimdLevel::kAvx2, SimdLevel::kAvx512),
                         [](const auto& info) { return std::string(SimdLevelName(info.param)); });

}  // namespace
}  // namespace zerofit::optim
