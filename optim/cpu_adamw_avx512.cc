// AVX-512 (F, BW, VL) AdamW body. Compiled with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c; called only
// after CPUID says so. Tails use masked loads and stores; the low-precision parameter copy is written with
// non-temporal stores (visible to other threads once the body returns: it ends with an sfence). Bit-identical
// to the scalar oracle (see adamw_math.h).
#include <immintrin.h>

#include "optim/adamw_8bit.h"
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

// The 8-bit step, a block of kQuantBlock elements at a time, in CpuAdamW8bit's operations: dequantise
// (the map's code times the block's scale), the AdamW arithmetic above, the block's new absmax (max of |x|,
// a NaN ignored as std::max ignores it), and quantise against it (x times 1 / max(absmax, 1e-38), clamped,
// then dynamic_map.cc's CountBelow: the number of the 255 midpoints m with !(m >= x)).
//
// The count without gathers (a gather-based binary search ran at a third of this speed on Zen 5), in two
// counts, as the midpoints ascend and those not >= x are a prefix: the group j < 16 is the number of groups
// of 16 whose last midpoint mid[16 j' + 15] is not >= x (15 broadcast compares), the offset t < 16 the
// number of the group's other 15 midpoints not >= x (col[t] lane j = mid[16 j + t]: 15 register permutes);
// the count is 16 j + t. A NaN counts every midpoint (code 255), as CountBelow does.
struct MidColumns {
  __m512 col[15];
  float ends[15];  // group j's last midpoint, mid[16 j + 15]
  explicit MidColumns(const float* map) {
    alignas(64) float cols[16][16];
    for (size_t i = 0; i + 1 < kMapCodes; ++i) cols[i % 16][i / 16] = (map[i] + map[i + 1]) / 2.0f;
    for (int t = 0; t < 15; ++t) col[t] = _mm512_load_ps(cols[t]);
    for (int j = 0; j < 15; ++j) ends[j] = cols[15][j];
  }
};

// The codes of 16 lanes nearest to x / absmax.
__m512i NearestCodes(const MidColumns& mids, __m512 x, float absmax) {
  x = _mm512_mul_ps(x, _mm512_set1_ps(1.0f / (absmax < 1e-38f ? 1e-38f : absmax)));
  x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-1.0f), _CMP_LT_OQ), x,
                           _mm512_set1_ps(-1.0f));
  x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(_mm512_set1_ps(1.0f), x, _CMP_LT_OQ), x, _mm512_set1_ps(1.0f));
  __m512i group = _mm512_setzero_si512(), offset = _mm512_setzero_si512();
#pragma GCC unroll 15
  for (int j = 0; j < 15; ++j) {  // the group: how many groups' last midpoints are not >= x
    const __mmask16 below = _mm512_cmp_ps_mask(_mm512_set1_ps(mids.ends[j]), x, _CMP_NGE_UQ);
    group = _mm512_mask_add_epi32(group, below, group, _mm512_set1_epi32(1));
  }
  // The group's midpoints ascend: those not >= x are a prefix, and their count is the offset. 15
  // independent permutes (a halving search would chain up to 8 selects).
#pragma GCC unroll 15
  for (int c = 0; c < 15; ++c) {
    const __mmask16 below = _mm512_cmp_ps_mask(_mm512_permutexvar_ps(group, mids.col[c]), x, _CMP_NGE_UQ);
    offset = _mm512_mask_add_epi32(offset, below, offset, _mm512_set1_epi32(1));
  }
  return _mm512_add_epi32(_mm512_slli_epi32(group, 4), offset);
}

template <DType G, int kOut>
struct Body8bit {
  static void Run(const AdamW8bitSpans& s, const AdamW8bitMaps& maps, const AdamWConstants& c) {
    const MidColumns mids_m(maps.m), mids_v(maps.v);
    for (size_t at = 0; at < s.n; at += kQuantBlock) {
      const size_t len = s.n - at < kQuantBlock ? s.n - at : kQuantBlock;
      UpdateBlock(s, maps, mids_m, mids_v, c, at, len);
    }
  }

  static void UpdateBlock(const AdamW8bitSpans& s, const AdamW8bitMaps& maps, const MidColumns& mids_m,
                          const MidColumns& mids_v, const AdamWConstants& c, size_t at, size_t len) {
    const size_t b = at / kQuantBlock;
    const __m512 decay = _mm512_set1_ps(c.decay), b1 = _mm512_set1_ps(c.b1), b2 = _mm512_set1_ps(c.b2);
    const __m512 omb1 = _mm512_set1_ps(c.one_minus_b1), omb2 = _mm512_set1_ps(c.one_minus_b2);
    const __m512 sqrt_bc2 = _mm512_set1_ps(c.sqrt_bc2), neg_step = _mm512_set1_ps(c.neg_step_size);
    const __m512 eps = _mm512_set1_ps(c.eps), gscale = _mm512_set1_ps(c.grad_scale);
    const __m512 m_scale = _mm512_set1_ps(s.m_absmax[b]), v_scale = _mm512_set1_ps(s.v_absmax[b]);
    alignas(64) float m_new[kQuantBlock], v_new[kQuantBlock];
    __m512 m_max = _mm512_setzero_ps(), v_max = _mm512_setzero_ps();
    for (size_t i = 0; i < len; i += 16) {
      const size_t left = len - i;
      const __mmask16 k =
          left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
      const __m512i mc = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, s.m + at + i));
      const __m512i vc = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, s.v + at + i));
      const __m512 m = _mm512_mul_ps(_mm512_i32gather_ps(mc, maps.m, 4), m_scale);
      const __m512 v = _mm512_mul_ps(_mm512_i32gather_ps(vc, maps.v, 4), v_scale);
      const __m512 g = _mm512_mul_ps(LoadGrad<G>(s.grad, at + i, k), gscale);
      const __m512 decayed = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s.param + at + i), decay);
      const __m512 mi = _mm512_fmadd_ps(b1, m, _mm512_mul_ps(omb1, g));
      const __m512 vi = _mm512_fmadd_ps(b2, v, _mm512_mul_ps(_mm512_mul_ps(omb2, g), g));
      const __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), sqrt_bc2), eps);
      const __m512 r = _mm512_fmadd_ps(neg_step, _mm512_div_ps(mi, denom), decayed);
      _mm512_mask_storeu_ps(s.param + at + i, k, r);
      StoreOut(s.param_out, at + i, k, r);
      _mm512_store_ps(m_new + i, mi);
      _mm512_store_ps(v_new + i, vi);
      // max(|x|, acc) keeps acc where |x| is NaN or not larger: std::max(acc, |x|)'s choice.
      m_max = _mm512_mask_max_ps(m_max, k, _mm512_abs_ps(mi), m_max);
      v_max = _mm512_mask_max_ps(v_max, k, _mm512_abs_ps(vi), v_max);
    }
    const float m_absmax = _mm512_reduce_max_ps(m_max), v_absmax = _mm512_reduce_max_ps(v_max);
    s.m_absmax[b] = m_absmax;
    s.v_absmax[b] = v_absmax;
    for (size_t i = 0; i < len; i += 16) {
      const size_t left = len - i;
      const __mmask16 k =
          left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
      _mm512_mask_cvtepi32_storeu_epi8(s.m + at + i, k,
                                       NearestCodes(mids_m, _mm512_load_ps(m_new + i), m_absmax));
      _mm512_mask_cvtepi32_storeu_epi8(s.v + at + i, k,
                                       NearestCodes(mids_v, _mm512_load_ps(v_new + i), v_absmax));
    }
  }

  static void StoreOut(void* out, size_t i, __mmask16 k, __m512 r) {
    if constexpr (kOut == 1) _mm512_mask_storeu_ps(static_cast<float*>(out) + i, k, r);
    if constexpr (kOut == 2) _mm256_mask_storeu_epi16(static_cast<uint16_t*>(out) + i, k, ToBf16(r));
    if constexpr (kOut == 3) {
      _mm256_mask_storeu_epi16(static_cast<uint16_t*>(out) + i, k,
                               _mm512_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
};

}  // namespace

void AdamWAvx512Body(const AdamWSpans& s, const AdamWConstants& c) { DispatchAdamW<Body>(s, c); }

void AdamW8bitAvx512Body(const AdamW8bitSpans& s, const AdamW8bitMaps& maps, const AdamWConstants& c) {
  DispatchAdamW<Body8bit>(s, maps, c);
}

}  // namespace zerofit::optim::internal
