// CPU AdamW on raw spans (decoupled weight decay, Loshchilov & Hutter): the arithmetic of
// torch::optim::AdamW (LibTorch 1.13), written once in adamw_math.h and vectorised with the same operation
// order, so every SIMD kernel is bit-identical to the scalar oracle. This header includes nothing heavy: it
// is used by the ZeRO-2 driver (sharding/) and the offload pipeline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"

namespace zerofit::core {
class ThreadPool;
}

namespace zerofit::optim {

// What stays fixed over a run; the learning rate changes every step (a schedule) and is given with it.
struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 1e-2f;
};

// One step's hyper-parameters: the run's config and this step's rate.
struct AdamWHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 1e-2f;
};

inline AdamWHyper StepHyper(const AdamWConfig& c, float lr) {
  return AdamWHyper{lr, c.beta1, c.beta2, c.eps, c.weight_decay};
}

// One AdamW update of n elements, in place on fp32 `param` (the master weights), `m` and `v`:
//   g      = grad[i] * grad_scale            (grad_scale folds loss-normalisation, unscaling and clipping)
//   param *= 1 - lr * weight_decay
//   m      = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// `grad` holds n elements of grad_dtype (fp32, bf16 or fp16). If `param_out` is non-null, the updated
// parameter is also written there as out_dtype (the bf16/fp16 model copy), fused into the same pass.
// Spans must not overlap. `step` counts from 1.
struct AdamWSpans {
  float* param = nullptr;
  const void* grad = nullptr;
  core::DType grad_dtype = core::DType::kFloat32;
  float* m = nullptr;
  float* v = nullptr;
  size_t n = 0;
  void* param_out = nullptr;
  core::DType out_dtype = core::DType::kFloat32;
};

using AdamWKernel = void (*)(const AdamWSpans& spans, const AdamWHyper& hyper, int64_t step,
                             float grad_scale);

enum class SimdLevel { kScalar, kAvx2, kAvx512 };
const char* SimdLevelName(SimdLevel level);
// The best level this CPU supports (CPUID): AVX-512 needs F+BW+VL, AVX2 needs AVX2+FMA+F16C.
SimdLevel DetectSimdLevel();
// The kernel for `level`; InvalidArgument if this CPU or build cannot run it.
absl::StatusOr<AdamWKernel> KernelFor(SimdLevel level);

// The scalar oracle and the SIMD kernels (each in its own translation unit with its own -m flags).
void CpuAdamWScalarKernel(const AdamWSpans& spans, const AdamWHyper& hyper, int64_t step, float grad_scale);
void CpuAdamWAvx2Kernel(const AdamWSpans& spans, const AdamWHyper& hyper, int64_t step, float grad_scale);
void CpuAdamWAvx512Kernel(const AdamWSpans& spans, const AdamWHyper& hyper, int64_t step, float grad_scale);

// Convenience form of the scalar oracle for fp32 gradients.
void CpuAdamWScalar(float* param, const float* grad, float* m, float* v, size_t n, const AdamWHyper& hyper,
                    int64_t step, float grad_scale, void* param_out = nullptr,
                    core::DType out_dtype = core::DType::kFloat32);

struct AdamW8bitSpans;  // adamw_8bit.h
struct AdamW8bitMaps;

// A span's AdamW moments in 8 bits (adamw_8bit.h: bitsandbytes' blockwise codes, one fp32 scale per 256
// elements from the span's first element), in place of AdamWSpans' fp32 m and v.
struct Moments8bit {
  uint8_t* m = nullptr;
  uint8_t* v = nullptr;
  float* m_absmax = nullptr;
  float* v_absmax = nullptr;
  bool on() const { return m != nullptr; }
};

// A multithreaded AdamW: splits spans into tiles (multiples of 64 elements, so every tile boundary keeps SIMD
// alignment; of 256 too, so a tile holds whole 8-bit blocks) and runs the chosen kernel on them across a
// thread pool. Thread-compatible.
class CpuAdamW {
 public:
  // With q8 on, the moments are 8-bit (spans.m and spans.v unused) and the step is CpuAdamW8bit's, block by
  // block, bit for bit its serial result.
  struct Task {
    AdamWSpans spans;
    AdamWHyper hyper;
    Moments8bit q8;
  };
  // threads >= 1 (counting the caller); level defaults to DetectSimdLevel().
  static absl::StatusOr<std::unique_ptr<CpuAdamW>> Create(int threads, SimdLevel level);
  static absl::StatusOr<std::unique_ptr<CpuAdamW>> Create(int threads) {
    return Create(threads, DetectSimdLevel());
  }
  // On a pool shared with other host work (the offload pipeline's gradient accumulation): ParallelFor calls
  // from different threads take turns, so the two never oversubscribe the cores.
  static absl::StatusOr<std::unique_ptr<CpuAdamW>> Create(std::shared_ptr<core::ThreadPool> pool,
                                                          SimdLevel level);
  ~CpuAdamW();

  // Called from the worker thread that finished a tile: elements [begin, end) of tasks[task] are final.
  using TileDone = std::function<void(size_t task, size_t begin, size_t end)>;
  void Step(const std::vector<Task>& tasks, int64_t step, float grad_scale,
            const TileDone& on_tile_done = nullptr);

  int threads() const;
  SimdLevel level() const { return level_; }
  static constexpr size_t kTileElements = 1 << 15;

 private:
  using Kernel8bit = void (*)(const AdamW8bitSpans& spans, const AdamW8bitMaps& maps, const AdamWHyper& hyper,
                              int64_t step, float grad_scale);
  CpuAdamW(std::shared_ptr<core::ThreadPool> pool, SimdLevel level, AdamWKernel kernel, Kernel8bit kernel8);
  void RunTile(const Task& task, size_t begin, size_t end, int64_t step, float grad_scale) const;
  std::shared_ptr<core::ThreadPool> pool_;
  SimdLevel level_;
  AdamWKernel kernel_;
  Kernel8bit kernel8_;       // the 8-bit step of the same level (adamw_8bit.h)
  std::vector<float> maps_;  // the 8-bit maps: m's 256 codes, then v's
};

}  // namespace zerofit::optim
