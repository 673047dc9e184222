// AVX-512 (F, BW, VL) AdamW body. Compiled with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c; called only
// after CPUID says so. Tails use masked loads and stores; the low-precision parameter copy is written with
// non-temporal stores (visible to other threads once the body returns: it ends with an sfence). Bit-identical
// to the scalar oracle (see adamw_math.h).
#include <immintrin.h>

#include "optim/adamw_dispatch.h"

namespace zerofit::optim::internal {
namespace {

using core::DType;

template <DType G>
__m512 LoadGrad(const void* g, size_t i, __mmask16 k) {
  if constexpr (G == DType::kFloat32) {
    return _mm512_maskz_loadu_ps(k, static_cast<const float*>(g) + i);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(k, static_cast<const uint16_t*>(g) + i);
    if constexpr (G == DType::kBFloat16) {
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      return _mm512_cvtph_ps(h);
    }
  }
}

// fp32 -> bf16, round to nearest even, NaN -> quiet NaN: the rule of core::FloatToBf16.
__m256i ToBf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                   _mm512_set1_epi32(0x7f800000));
  const __m512i nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, nan));
}

// kOut: 0 none, 1 fp32, 2 bf16, 3 fp16.
template <DType G, int kOut>
struct Body {
  static void Run(const AdamWSpans& s, const AdamWConstants& c) {
    const __m512 decay = _mm512_set1_ps(c.decay), b1 = _mm512_set1_ps(c.b1), b2 = _mm512_set1_ps(c.b2);
    const __m512 omb1 = _mm512_set1_ps(c.one_minus_b1), omb2 = _mm512_set1_ps(c.one_minus_b2);
    const __m512 sqrt_bc2 = _mm512_set1_ps(c.sqrt_bc2), neg_step = _mm512_set1_ps(c.neg_step_size);
    const __m512 eps = _mm512_set1_ps(c.eps), gscale = _mm512_set1_ps(c.grad_scale);
    // The kernel is memory-bound past the L2 (see BENCHMARKS.md), so two choices are about bytes, not math:
    // - The parameter copy is written and never read here: non-temporal stores skip the read-for-ownership of
    //   its cache lines (2 of the 30 bytes per element that a plain store moves for a bf16 copy). They need
    //   aligned full vectors; tails and unaligned buffers use ordinary masked stores.
    // - Software prefetch kPrefetch elements (1 KiB of fp32) ahead on every read stream, one per cache line:
    //   measured ~10% faster on 16M-64M elements; the hardware prefetchers alone keep fewer lines in flight.
    constexpr size_t kOutBytes = kOut == 1 ? 4 : 2;
    constexpr size_t kGradBytes = G == DType::kFloat32 ? 4 : 2;
    constexpr size_t kPrefetch = 256;
    const bool stream_out = kOut != 0 && reinterpret_cast<uintptr_t>(s.param_out) % (16 * kOutBytes) == 0;
    const char* grad_bytes = static_cast<const char*>(s.grad);
    for (size_t i = 0; i < s.n; i += 16) {
      const size_t left = s.n - i;
      if (i + kPrefetch < s.n) {
        _mm_prefetch(reinterpret_cast<const char*>(s.param + i + kPrefetch), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(s.m + i + kPrefetch), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(s.v + i + kPrefetch), _MM_HINT_T0);
        if ((i * kGradBytes) % 64 == 0) _mm_prefetch(grad_bytes + (i + kPrefetch) * kGradBytes, _MM_HINT_T0);
      }
      const __mmask16 k =
          left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
      const __m512 g = _mm512_mul_ps(LoadGrad<G>(s.grad, i, k), gscale);
      const __m512 decayed = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s.param + i), decay);
      const __m512 mi = _mm512_fmadd_ps(b1, _mm512_maskz_loadu_ps(k, s.m + i), _mm512_mul_ps(omb1, g));
      const __m512 vi =
          _mm512_fmadd_ps(b2, _mm512_maskz_loadu_ps(k, s.v + i), _mm512_mul_ps(_mm512_mul_ps(omb2, g), g));
      const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), sqrt_bc2), eps);
      const __m512 r = _mm512_fmadd_ps(neg_step, _mm512_div_ps(mi, denom), decayed);
      _mm512_mask_storeu_ps(s.m + i, k, mi);
      _mm512_mask_storeu_ps(s.v + i, k, vi);
      _mm512_mask_storeu_ps(s.param + i, k, r);
      if constexpr (kOut == 1) {
        float* out = static_cast<float*>(s.param_out) + i;
        if (stream_out && left >= 16) {
          _mm512_stream_ps(out, r);
        } else {
          _mm512_mask_storeu_ps(out, k, r);
        }
      }
      if constexpr (kOut == 2 || kOut == 3) {
        __m256i h;
        if constexpr (kOut == 2) {
          h = ToBf16(r);
        } else {
          h = _mm512_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        }
        uint16_t* out = static_cast<uint16_t*>(s.param_out) + i;
        if (stream_out && left >= 16) {
          _mm256_stream_si256(reinterpret_cast<__m256i*>(out), h);
        } else {
          _mm256_mask_storeu_epi16(out, k, h);
        }
      }
    }
    // Non-temporal stores are weakly ordered: fence them before the caller publishes the copy.
    if (stream_out) _mm_sfence();
  }
};

}  // namespace

void AdamWAvx512Body(const AdamWSpans& s, const AdamWConstants& c) { DispatchAdamW<Body>(s, c); }

}  // namespace zerofit::optim::internal
