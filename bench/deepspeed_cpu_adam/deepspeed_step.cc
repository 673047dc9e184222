// Compiled only by bench/deepspeed_cpu_adam_bench.sh's build (CMake option ZEROFIT_DEEPSPEED_SRC), against a
// DeepSpeed source copy that is never committed, with DeepSpeed's CPU op-builder flags. See deepspeed_step.h.
#include "bench/deepspeed_cpu_adam/deepspeed_step.h"

#include <omp.h>

#include "cpu_adam.h"  // DeepSpeed: csrc/includes/cpu_adam.h (which includes simd.h)

#if !defined(__AVX512__) && !defined(__AVX256__)
#error "build with -D__AVX512__ or -D__AVX256__, as DeepSpeed's op builder does on x86"
#endif

namespace zerofit::bench {

const char* DeepSpeedSimdName() {
#if defined(__AVX512__)
  return "AVX512";
#else
  return "AVX2";
#endif
}

size_t DeepSpeedStepGranule() { return SIMD_WIDTH * 8; }

bool DeepSpeedAdamStep(float* param, float* grad, float* exp_avg, float* exp_avg_sq, size_t n,
                       const DeepSpeedHyper& h, int64_t step, int threads) {
  if (n % DeepSpeedStepGranule() != 0) return false;
  omp_set_num_threads(threads);
  // ds_adam_step: a fresh optimizer reaches betta_t = beta^step through IncrementStep's pow branch.
  Adam_Optimizer opt(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, /*adamw_mode=*/true);
  opt.IncrementStep(static_cast<size_t>(step), h.beta1, h.beta2);
  opt.update_state(h.lr, h.eps, h.weight_decay, /*bias_correction=*/true);
  size_t rounded = 0;
  opt.Step_AVX<8>(&rounded, param, grad, exp_avg, exp_avg_sq, n, /*parallel=*/true);
  return rounded == n;
}

bool DeepSpeedCastToBf16(const float* src, uint16_t* dst, size_t n, int threads) {
#if defined(__AVX512__)
  if (n % SIMD_WIDTH != 0) return false;
  omp_set_num_threads(threads);
  const int64_t count = static_cast<int64_t>(n);
#pragma omp parallel for
  for (int64_t i = 0; i < count; i += SIMD_WIDTH) {
    SIMD_STORE_BF16(dst + i, SIMD_LOAD(src + i));
  }
  return true;
#else
  return false;
#endif
}

}  // namespace zerofit::bench
