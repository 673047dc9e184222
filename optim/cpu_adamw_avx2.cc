// AVX2 + FMA + F16C AdamW body. Compiled with -mavx2 -mfma -mf16c; called only after CPUID says so. The
// low-precision parameter copy is written with non-temporal stores (visible to other threads once the body
// returns: it ends with an sfence).
// Bit-identical to the scalar oracle (see adamw_math.h for the operation order and the ODR rules).
#include <immintrin.h>

#include <cstring>

#include "optim/adamw_dispatch.h"

namespace zerofit::optim::internal {
namespace {

using core::DType;

template <DType G>
__m256 LoadGrad(const void* g, size_t i) {
  if constexpr (G == DType::kFloat32) {
    return _mm256_loadu_ps(static_cast<const float*>(g) + i);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(g) + i));
    if constexpr (G == DType::kBFloat16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  }
}

// fp32 -> bf16, round to nearest even, NaN -> quiet NaN: the rule of core::FloatToBf16.
__m128i ToBf16(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  const __m256i is_nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
  // Pack 8 x u32 (all <= 0xffff) into 8 x u16: packus works per 128-bit lane, then gather the two low halves.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
  return _mm256_castsi256_si128(packed);
}

// kOut: 0 none, 1 fp32, 2 bf16, 3 fp16.
template <DType G, int kOut>
struct Body {
  static void Run(const AdamWSpans& s, const AdamWConstants& c) {
    const __m256 decay = _mm256_set1_ps(c.decay), b1 = _mm256_set1_ps(c.b1), b2 = _mm256_set1_ps(c.b2);
    const __m256 omb1 = _mm256_set1_ps(c.one_minus_b1), omb2 = _mm256_set1_ps(c.one_minus_b2);
    const __m256 sqrt_bc2 = _mm256_set1_ps(c.sqrt_bc2), neg_step = _mm256_set1_ps(c.neg_step_size);
    const __m256 eps = _mm256_set1_ps(c.eps), gscale = _mm256_set1_ps(c.grad_scale);
    // Memory-bound past the L2, as in the AVX-512 body: the parameter copy goes out with non-temporal stores
    // when it is aligned to a full vector (no read-for-ownership of a write-only stream), and every read
    // stream is prefetched kPrefetch elements ahead, once per cache line.
    constexpr size_t kOutBytes = kOut == 1 ? 4 : 2;
    constexpr size_t kGradBytes = G == DType::kFloat32 ? 4 : 2;
    constexpr size_t kPrefetch = 256;
    const bool stream_out = kOut != 0 && reinterpret_cast<uintptr_t>(s.param_out) % (8 * kOutBytes) == 0;
    auto step8 = [&](float* p, const void* grad, size_t gi, float* m, float* v, void* out, size_t oi,
                     bool stream) {
      const __m256 g = _mm256_mul_ps(LoadGrad<G>(grad, gi), gscale);
      const __m256 decayed = _mm256_mul_ps(_mm256_loadu_ps(p), decay);
      const __m256 mi = _mm256_fmadd_ps(b1, _mm256_loadu_ps(m), _mm256_mul_ps(omb1, g));
      const __m256 vi = _mm256_fmadd_ps(b2, _mm256_loadu_ps(v), _mm256_mul_ps(_mm256_mul_ps(omb2, g), g));
      const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), sqrt_bc2), eps);
      const __m256 r = _mm256_fmadd_ps(neg_step, _mm256_div_ps(mi, denom), decayed);
      _mm256_storeu_ps(m, mi);
      _mm256_storeu_ps(v, vi);
      _mm256_storeu_ps(p, r);
      if constexpr (kOut == 1) {
        float* o = static_cast<float*>(out) + oi;
        if (stream) {
          _mm256_stream_ps(o, r);
        } else {
          _mm256_storeu_ps(o, r);
        }
      }
      if constexpr (kOut == 2 || kOut == 3) {
        __m128i h;
        if constexpr (kOut == 2) {
          h = ToBf16(r);
        } else {
          h = _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        }
        __m128i* o = reinterpret_cast<__m128i*>(static_cast<uint16_t*>(out) + oi);
        if (stream) {
          _mm_stream_si128(o, h);
        } else {
          _mm_storeu_si128(o, h);
        }
      }
    };
    const size_t n = s.n, body = n / 8 * 8;
    const char* grad_bytes = static_cast<const char*>(s.grad);
    for (size_t i = 0; i < body; i += 8) {
      if (i % 16 == 0 && i + kPrefetch < n) {
        _mm_prefetch(reinterpret_cast<const char*>(s.param + i + kPrefetch), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(s.m + i + kPrefetch), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(s.v + i + kPrefetch), _MM_HINT_T0);
        if ((i * kGradBytes) % 64 == 0) _mm_prefetch(grad_bytes + (i + kPrefetch) * kGradBytes, _MM_HINT_T0);
      }
      step8(s.param + i, s.grad, i, s.m + i, s.v + i, s.param_out, i, stream_out);
    }
    // Non-temporal stores are weakly ordered: fence them before the caller publishes the copy.
    if (stream_out) _mm_sfence();
    if (body == n) return;
    // Tail: run the same vector code on zero-padded copies, then copy the real lanes back.
    const size_t t = n - body;
    alignas(32) float p[8] = {}, m[8] = {}, v[8] = {}, o[8] = {};
    alignas(32) uint8_t g[32] = {};
    const size_t gsize = G == DType::kFloat32 ? 4 : 2;
    const size_t osize = kOut == 1 ? 4 : 2;
    std::memcpy(p, s.param + body, t * 4);
    std::memcpy(m, s.m + body, t * 4);
    std::memcpy(v, s.v + body, t * 4);
    std::memcpy(g, static_cast<const uint8_t*>(s.grad) + body * gsize, t * gsize);
    step8(p, g, 0, m, v, o, 0, /*stream=*/false);
    std::memcpy(s.param + body, p, t * 4);
    std::memcpy(s.m + body, m, t * 4);
    std::memcpy(s.v + body, v, t * 4);
    if constexpr (kOut != 0) std::memcpy(static_cast<uint8_t*>(s.param_out) + body * osize, o, t * osize);
  }
};

}  // namespace

void AdamWAvx2Body(const AdamWSpans& s, const AdamWConstants& c) { DispatchAdamW<Body>(s, c); }

}  // namespace zerofit::optim::internal
