// The scalar AdamW oracle and the runtime dispatch (this file is compiled without ISA flags).
#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "absl/strings/str_cat.h"
#include "core/thread_pool.h"
#include "optim/adamw_8bit.h"
#include "optim/adamw_math.h"
#include "optim/cpu_adamw.h"

namespace zerofit::optim {
namespace internal {

AdamWConstants MakeConstants(const AdamWHyper& h, int64_t step, float grad_scale) {
  const double lr = h.lr;
  const double bc1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(step));
  return AdamWConstants{static_cast<float>(1.0 - lr * static_cast<double>(h.weight_decay)),
                        h.beta1,
                        h.beta2,
                        static_cast<float>(1.0 - static_cast<double>(h.beta1)),
                        static_cast<float>(1.0 - static_cast<double>(h.beta2)),
                        static_cast<float>(std::sqrt(bc2)),
                        static_cast<float>(-(lr / bc1)),
                        h.eps,
                        grad_scale};
}

}  // namespace internal

void CpuAdamWScalarKernel(const AdamWSpans& s, const AdamWHyper& hyper, int64_t step, float grad_scale) {
  const internal::AdamWConstants c = internal::MakeConstants(hyper, step, grad_scale);
  for (size_t i = 0; i < s.n; ++i) {
    const float p =
        internal::AdamWElement(s.param + i, core::LoadAsFloat(s.grad, s.grad_dtype, i), s.m + i, s.v + i, c);
    if (s.param_out != nullptr) core::StoreFromFloat(s.param_out, s.out_dtype, i, p);
  }
}

void CpuAdamWAvx2Kernel(const AdamWSpans& s, const AdamWHyper& hyper, int64_t step, float grad_scale) {
  internal::AdamWAvx2Body(s, internal::MakeConstants(hyper, step, grad_scale));
}

void CpuAdamWAvx512Kernel(const AdamWSpans& s, const AdamWHyper& hyper, int64_t step, float grad_scale) {
  internal::AdamWAvx512Body(s, internal::MakeConstants(hyper, step, grad_scale));
}

void CpuAdamWScalar(float* param, const float* grad, float* m, float* v, size_t n, const AdamWHyper& hyper,
                    int64_t step, float grad_scale, void* param_out, core::DType out_dtype) {
  AdamWSpans s;
  s.param = param;
  s.grad = grad;
  s.grad_dtype = core::DType::kFloat32;
  s.m = m;
  s.v = v;
  s.n = n;
  s.param_out = param_out;
  s.out_dtype = out_dtype;
  CpuAdamWScalarKernel(s, hyper, step, grad_scale);
}

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar:
      return "scalar";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kAvx512:
      return "avx512";
  }
  return "unknown";
}

SimdLevel DetectSimdLevel() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return SimdLevel::kAvx512;
  }
  // F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) {
    return SimdLevel::kAvx2;
  }
#endif
  return SimdLevel::kScalar;
}

absl::StatusOr<AdamWKernel> KernelFor(SimdLevel level) {
  const SimdLevel best = DetectSimdLevel();
  if (static_cast<int>(level) > static_cast<int>(best)) {
    return absl::InvalidArgumentError(absl::StrCat("this CPU cannot run the ", SimdLevelName(level),
                                                   " AdamW kernel (best available: ", SimdLevelName(best),
                                                   ")"));
  }
  switch (level) {
    case SimdLevel::kScalar:
      return &CpuAdamWScalarKernel;
    case SimdLevel::kAvx2:
      return &CpuAdamWAvx2Kernel;
    case SimdLevel::kAvx512:
      return &CpuAdamWAvx512Kernel;
  }
  return absl::InvalidArgumentError("unknown SIMD level");
}

CpuAdamW::CpuAdamW(std::shared_ptr<core::ThreadPool> pool, SimdLevel level, AdamWKernel kernel,
                   Kernel8bit kernel8)
    : pool_(std::move(pool)),
      level_(level),
      kernel_(kernel),
      kernel8_(kernel8),
      maps_(HostAdamW8bitMaps().Concatenated()) {}
CpuAdamW::~CpuAdamW() = default;

absl::StatusOr<std::unique_ptr<CpuAdamW>> CpuAdamW::Create(int threads, SimdLevel level) {
  if (threads < 1) return absl::InvalidArgumentError(absl::StrCat("CpuAdamW: threads ", threads, " < 1"));
  auto kernel = KernelFor(level);
  if (!kernel.ok()) return kernel.status();
  return Create(std::make_shared<core::ThreadPool>(threads), level);
}

absl::StatusOr<std::unique_ptr<CpuAdamW>> CpuAdamW::Create(std::shared_ptr<core::ThreadPool> pool,
                                                           SimdLevel level) {
  if (pool == nullptr) return absl::InvalidArgumentError("CpuAdamW: thread pool is null");
  auto kernel = KernelFor(level);
  if (!kernel.ok()) return kernel.status();
  auto kernel8 = AdamW8bitKernelFor(level);
  if (!kernel8.ok()) return kernel8.status();
  return std::unique_ptr<CpuAdamW>(new CpuAdamW(std::move(pool), level, *kernel, *kernel8));
}

int CpuAdamW::threads() const { return pool_->threads(); }

namespace {
AdamWSpans Slice(const AdamWSpans& s, size_t begin, size_t end) {
  AdamWSpans t = s;
  t.param += begin;
  t.grad = static_cast<const char*>(s.grad) + begin * core::DTypeSize(s.grad_dtype);
  t.m += begin;
  t.v += begin;
  if (s.param_out != nullptr)
    t.param_out = static_cast<char*>(s.param_out) + begin * core::DTypeSize(s.out_dtype);
  t.n = end - begin;
  return t;
}

// Elements [begin, end) of an 8-bit task, begin on a block boundary.
AdamW8bitSpans Slice8bit(const AdamWSpans& s, const Moments8bit& q, size_t begin, size_t end) {
  AdamW8bitSpans t;
  t.param = s.param + begin;
  t.grad = static_cast<const char*>(s.grad) + begin * core::DTypeSize(s.grad_dtype);
  t.grad_dtype = s.grad_dtype;
  t.m = q.m + begin;
  t.v = q.v + begin;
  t.m_absmax = q.m_absmax + begin / kQuantBlock;
  t.v_absmax = q.v_absmax + begin / kQuantBlock;
  t.n = end - begin;
  if (s.param_out != nullptr) {
    t.param_out = static_cast<char*>(s.param_out) + begin * core::DTypeSize(s.out_dtype);
  }
  t.out_dtype = s.out_dtype;
  return t;
}
}  // namespace

static_assert(CpuAdamW::kTileElements % kQuantBlock == 0, "a tile must hold whole 8-bit blocks");

void CpuAdamW::RunTile(const Task& task, size_t begin, size_t end, int64_t step, float grad_scale) const {
  if (!task.q8.on()) return kernel_(Slice(task.spans, begin, end), task.hyper, step, grad_scale);
  const AdamW8bitMaps maps{maps_.data(), maps_.data() + kMapCodes};
  kernel8_(Slice8bit(task.spans, task.q8, begin, end), maps, task.hyper, step, grad_scale);
}

void CpuAdamW::Step(const std::vector<Task>& tasks, int64_t step, float grad_scale,
                    const TileDone& on_tile_done) {
  struct Tile {
    size_t task, begin, end;
  };
  std::vector<Tile> tiles;
  for (size_t t = 0; t < tasks.size(); ++t) {
    for (size_t b = 0; b < tasks[t].spans.n; b += kTileElements) {
      tiles.push_back(Tile{t, b, std::min(tasks[t].spans.n, b + kTileElements)});
    }
  }
  pool_->ParallelFor(tiles.size(), [&](size_t i) {
    const Tile& tile = tiles[i];
    RunTile(tasks[tile.task], tile.begin, tile.end, step, grad_scale);
    if (on_tile_done) on_tile_done(tile.task, tile.begin, tile.end);
  });
}

}  // namespace zerofit::optim
