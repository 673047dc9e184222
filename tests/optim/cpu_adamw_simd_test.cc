// Every SIMD AdamW kernel and the threaded runner against the scalar oracle: identical bits (stronger than
// the required 1e-6 relative on fp32 and identical bf16), on random inputs of odd lengths, for every gradient
// and output dtype.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "optim/cpu_adamw.h"

namespace zerofit::optim {
namespace {

using core::DType;

struct State {
  std::vector<float> p, m, v;
  std::vector<uint8_t> g, out;
};

State Random(size_t n, DType gt, DType ot, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1e-2f);
  State s;
  s.p.resize(n);
  s.m.resize(n);
  s.v.resize(n);
  s.g.resize(n * core::DTypeSize(gt));
  s.out.assign(n * core::DTypeSize(ot), 0);
  for (size_t i = 0; i < n; ++i) {
    s.p[i] = normal(rng);
    s.m[i] = 1e-2f * normal(rng);
    s.v[i] = uni(rng) * uni(rng);
    // Gradients spanning many magnitudes, including exact zeros.
    const float g = i % 13 == 0 ? 0.0f : normal(rng) * std::pow(10.0f, static_cast<float>(i % 7) - 4.0f);
    core::StoreFromFloat(s.g.data(), gt, i, g);
  }
  return s;
}

AdamWSpans Spans(State& s, DType gt, DType ot, bool with_out) {
  AdamWSpans sp;
  sp.param = s.p.data();
  sp.grad = s.g.data();
  sp.grad_dtype = gt;
  sp.m = s.m.data();
  sp.v = s.v.data();
  sp.n = s.p.size();
  sp.param_out = with_out ? s.out.data() : nullptr;
  sp.out_dtype = ot;
  return sp;
}

void ExpectSame(const State& a, const State& b, const std::string& what) {
  ASSERT_EQ(0, std::memcmp(a.p.data(), b.p.data(), a.p.size() * 4)) << what << ": master weights differ";
  ASSERT_EQ(0, std::memcmp(a.m.data(), b.m.data(), a.m.size() * 4)) << what << ": m differs";
  ASSERT_EQ(0, std::memcmp(a.v.data(), b.v.data(), a.v.size() * 4)) << what << ": v differs";
  ASSERT_EQ(a.out, b.out) << what << ": low-precision parameter copy differs";
}

std::vector<SimdLevel> Levels() {
  std::vector<SimdLevel> out;
  for (SimdLevel l : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (KernelFor(l).ok()) out.push_back(l);
  }
  return out;
}

TEST(CpuAdamWSimdTest, EveryKernelIsBitIdenticalToTheScalarOracle) {
  std::printf("CPU supports up to %s\n", SimdLevelName(DetectSimdLevel()));
  AdamWHyper h;
  h.lr = 2e-3f;
  h.weight_decay = 0.05f;
  for (SimdLevel level : Levels()) {
    const AdamWKernel kernel = *KernelFor(level);
    for (size_t n : {1u, 7u, 8u, 15u, 16u, 17u, 31u, 63u, 1000u, 4097u}) {
      for (DType gt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
        for (DType ot : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
          for (bool with_out : {false, true}) {
            State want = Random(n, gt, ot, static_cast<uint32_t>(n * 31 + 7));
            State got = want;
            for (int64_t step = 1; step <= 3; ++step) {
              CpuAdamWScalarKernel(Spans(want, gt, ot, with_out), h, step, 0.37f);
              kernel(Spans(got, gt, ot, with_out), h, step, 0.37f);
            }
            ExpectSame(want, got,
                       std::string(SimdLevelName(level)) + " n=" + std::to_string(n) + " grad " +
                           core::DTypeName(gt) + " out " + core::DTypeName(ot));
          }
        }
      }
    }
  }
}

// The SIMD kernels write the parameter copy with non-temporal stores when it is aligned to a full vector and
// with ordinary stores otherwise: both paths, every output dtype, must give the oracle's bits.
TEST(CpuAdamWSimdTest, ParameterCopyIsTheSameAlignedOrNot) {
  AdamWHyper h;
  for (SimdLevel level : Levels()) {
    const AdamWKernel kernel = *KernelFor(level);
    for (size_t n : {16u, 17u, 64u, 1000u, 4097u}) {
      for (DType ot : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
        for (size_t offset : {0u, 2u, 4u, 16u, 32u}) {
          State want = Random(n, DType::kBFloat16, ot, static_cast<uint32_t>(n + offset));
          State got = want;
          CpuAdamWScalarKernel(Spans(want, DType::kBFloat16, ot, true), h, 2, 1.0f);
          // A scratch buffer whose copy starts `offset` bytes past a 64-byte boundary.
          std::vector<uint8_t> scratch(got.out.size() + 128);
          const uintptr_t base = reinterpret_cast<uintptr_t>(scratch.data());
          uint8_t* out = scratch.data() + ((64 - base % 64) % 64) + offset;
          AdamWSpans sp = Spans(got, DType::kBFloat16, ot, true);
          sp.param_out = out;
          kernel(sp, h, 2, 1.0f);
          std::memcpy(got.out.data(), out, got.out.size());
          ExpectSame(want, got,
                     std::string(SimdLevelName(level)) + " n=" + std::to_string(n) + " out " +
                         core::DTypeName(ot) + " offset " + std::to_string(offset));
        }
      }
    }
  }
}

TEST(CpuAdamWSimdTest, ThreadedRunnerMatchesOneScalarPassOverSeveralTasks) {
  AdamWHyper decay, no_decay;
  no_decay.weight_decay = 0.0f;
  for (SimdLevel level : Levels()) {
    for (int threads : {1, 2, 3}) {
      auto runner = CpuAdamW::Create(threads, level);
      ASSERT_TRUE(runner.ok()) << runner.status();
      const size_t sizes[2] = {3 * CpuAdamW::kTileElements + 123, 77};
      std::vector<State> want, got;
      for (size_t i = 0; i < 2; ++i) {
        want.push_back(Random(sizes[i], DType::kBFloat16, DType::kBFloat16, 11 + i));
        got.push_back(want.back());
      }
      std::vector<CpuAdamW::Task> tasks;
      for (size_t i = 0; i < 2; ++i) {
        CpuAdamWScalarKernel(Spans(want[i], DType::kBFloat16, DType::kBFloat16, true), i ? no_decay : decay,
                             5, 1.5f);
        tasks.push_back({Spans(got[i], DType::kBFloat16, DType::kBFloat16, true), i ? no_decay : decay, {}});
      }
      (*runner)->Step(tasks, 5, 1.5f);
      for (size_t i = 0; i < 2; ++i)
        ExpectSame(want[i], got[i], std::string(SimdLevelName(level)) + " threaded");
    }
  }
}

TEST(CpuAdamWSimdTest, RejectsBadThreadCounts) {
  EXPECT_EQ(CpuAdamW::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zerofit::optim
