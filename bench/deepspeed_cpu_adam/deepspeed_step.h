// The DeepSpeed side of deepspeed_cpu_adam_bench: DeepSpeed's own CPU Adam step (csrc/includes/cpu_adam.h,
// Adam_Optimizer::Step_AVX<8>, the hot loop of Step_8) and the fp32 -> bf16 cast that its ZeRO-Offload path
// needs after the step, written with DeepSpeed's own bf16 conversion (simd.h). The implementation is compiled
// against a DeepSpeed source copy with DeepSpeed's op-builder flags (-O3 -march=native -fopenmp
// -D__AVX512__); this header is all the rest of the bench sees of it, so no DeepSpeed or -march=native code
// is inlined into zerofit's translation units.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zerofit::bench {

struct DeepSpeedHyper {
  float lr, beta1, beta2, eps, weight_decay;
};

// The SIMD flavour DeepSpeed was compiled with ("AVX512" or "AVX2").
const char* DeepSpeedSimdName();

// Elements per DeepSpeed vector iteration of Step_AVX<8> (SIMD width x 8). The harness only uses sizes that
// are multiples of it: the remainder would go through Step_4 / Step_1, which live in cpu_adam_impl.cpp
// (LibTorch and pybind11 code) and are not compiled here.
size_t DeepSpeedStepGranule();

// One AdamW step (adamw_mode = true, bias correction on) of n fp32 elements in place, exactly as
// ds_adam_step does it: IncrementStep(step), update_state(lr, eps, weight_decay), then the vector loop, with
// OpenMP on `threads` threads. Returns false (and does nothing) unless n is a multiple of
// DeepSpeedStepGranule().
bool DeepSpeedAdamStep(float* param, float* grad, float* exp_avg, float* exp_avg_sq, size_t n,
                       const DeepSpeedHyper& hyper, int64_t step, int threads);

// dst[i] = bf16(src[i]) (round to nearest even, NaN -> 0x7fc0) with DeepSpeed's SIMD_STORE_BF16, OpenMP on
// `threads` threads. Returns false (and does nothing) unless n is a multiple of 16 and DeepSpeed was built
// for AVX-512 (its AVX2 build has no bf16 conversion).
bool DeepSpeedCastToBf16(const float* src, uint16_t* dst, size_t n, int threads);

}  // namespace zerofit::bench
