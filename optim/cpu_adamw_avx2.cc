// AVX2 + FMA + F16C AdamW body. Compiled with -mavx2 -mfma -mf16c; called only after CPUID says so. The
// low-precision parameter copy is written with non-temporal stores (visible to other threads once the body
// returns: it ends with an sfence).
// Bit-identical to the scalar oracle (see adamw_math.h for the operation order and the ODR rules).
#include <immintrin.h>

#include <cstring>

#include "optim/adamw_8bit.h"
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

// The 8-bit step (adamw_8bit.h) with AVX2, in CpuAdamW8bit's operations (see the AVX-512 body): dequantise,
// AdamW, the block's absmax (a NaN ignored), quantise. The nearest code as the AVX-512 body counts it, with
// groups of 32 for 8 lanes: the group g < 8 from the 7 groups' last midpoints mid[32 g' + 31], the offset
// t < 32 from the group's other 31 (col[t] lane g = mid[32 g + t], a register permute each: a gather-based
// search ran no faster than the scalar code on Zen 5); the count is 32 g + t.
struct MidColumns {
  __m256 col[31];
  float ends[7];  // group g's last midpoint, mid[32 g + 31]
  explicit MidColumns(const float* map) {
    alignas(32) float cols[32][8];
    for (size_t i = 0; i + 1 < kMapCodes; ++i) cols[i % 32][i / 32] = (map[i] + map[i + 1]) / 2.0f;
    for (int t = 0; t < 31; ++t) col[t] = _mm256_load_ps(cols[t]);
    for (int g = 0; g < 7; ++g) ends[g] = cols[31][g];
  }
};

// The codes of 8 lanes nearest to x / absmax.
__m256i NearestCodes(const MidColumns& mids, __m256 x, float absmax) {
  x = _mm256_mul_ps(x, _mm256_set1_ps(1.0f / (absmax < 1e-38f ? 1e-38f : absmax)));
  x = _mm256_blendv_ps(x, _mm256_set1_ps(-1.0f), _mm256_cmp_ps(x, _mm256_set1_ps(-1.0f), _CMP_LT_OQ));
  x = _mm256_blendv_ps(x, _mm256_set1_ps(1.0f), _mm256_cmp_ps(_mm256_set1_ps(1.0f), x, _CMP_LT_OQ));
  __m256i group = _mm256_setzero_si256(), offset = _mm256_setzero_si256();
#pragma GCC unroll 7
  for (int j = 0; j < 7; ++j) {  // the group: how many groups' last midpoints are not >= x
    const __m256 below = _mm256_cmp_ps(_mm256_set1_ps(mids.ends[j]), x, _CMP_NGE_UQ);
    group = _mm256_sub_epi32(group, _mm256_castps_si256(below));  // a true lane is -1
  }
  // The group's midpoints ascend: those not >= x are a prefix, and their count is the offset. 31
  // independent permutes (a halving search would chain up to 16 selects).
#pragma GCC unroll 31
  for (int c = 0; c < 31; ++c) {
    const __m256 below = _mm256_cmp_ps(_mm256_permutevar8x32_ps(mids.col[c], group), x, _CMP_NGE_UQ);
    offset = _mm256_sub_epi32(offset, _mm256_castps_si256(below));  // a true lane is -1
  }
  return _mm256_add_epi32(_mm256_slli_epi32(group, 5), offset);
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

  // 8 elements from p, g, the codes mc and vc (in the block's chunk `i`); the new moments go to m_new and
  // v_new, their magnitudes into the maxima for the first `live` lanes.
  struct Chunk {
    float* p;
    const void* g;
    const uint8_t* mc;
    const uint8_t* vc;
    void* out;
  };

  static void UpdateBlock(const AdamW8bitSpans& s, const AdamW8bitMaps& maps, const MidColumns& mids_m,
                          const MidColumns& mids_v, const AdamWConstants& c, size_t at, size_t len) {
    const size_t b = at / kQuantBlock;
    const float m_scale = s.m_absmax[b], v_scale = s.v_absmax[b];
    alignas(32) float m_new[kQuantBlock], v_new[kQuantBlock];
    __m256 m_max = _mm256_setzero_ps(), v_max = _mm256_setzero_ps();
    constexpr size_t kGradBytes = G == DType::kFloat32 ? 4 : 2, kOutBytes = kOut == 1 ? 4 : 2;
    for (size_t i = 0; i < len; i += 8) {
      const size_t live = len - i < 8 ? len - i : 8;
      const size_t e = at + i;
      if (live == 8) {
        Step(Chunk{s.param + e, static_cast<const char*>(s.grad) + e * kGradBytes, s.m + e, s.v + e,
                   s.param_out == nullptr ? nullptr : static_cast<char*>(s.param_out) + e * kOutBytes},
             maps, m_scale, v_scale, c, 8, m_new + i, v_new + i, &m_max, &v_max);
        continue;
      }
      // The ragged end of the last block: the same code on zero-padded copies, the live lanes copied back.
      alignas(32) float p[8] = {};
      alignas(32) uint8_t g[32] = {}, mc[8] = {}, vc[8] = {}, out[32] = {};
      std::memcpy(p, s.param + e, live * 4);
      std::memcpy(g, static_cast<const char*>(s.grad) + e * kGradBytes, live * kGradBytes);
      std::memcpy(mc, s.m + e, live);
      std::memcpy(vc, s.v + e, live);
      alignas(32) float mt[8], vt[8];
      Step(Chunk{p, g, mc, vc, out}, maps, m_scale, v_scale, c, live, mt, vt, &m_max, &v_max);
      std::memcpy(s.param + e, p, live * 4);
      if (kOut != 0) std::memcpy(static_cast<char*>(s.param_out) + e * kOutBytes, out, live * kOutBytes);
      std::memcpy(m_new + i, mt, live * 4);
      std::memcpy(v_new + i, vt, live * 4);
    }
    s.m_absmax[b] = HorizontalMax(m_max);
    s.v_absmax[b] = HorizontalMax(v_max);
    for (size_t i = 0; i < len; i += 8) {
      const size_t live = len - i < 8 ? len - i : 8;
      StoreCodes(NearestCodes(mids_m, Load8(m_new + i, live), s.m_absmax[b]), s.m + at + i, live);
      StoreCodes(NearestCodes(mids_v, Load8(v_new + i, live), s.v_absmax[b]), s.v + at + i, live);
    }
  }

  static void Step(const Chunk& k, const AdamW8bitMaps& maps, float m_scale, float v_scale,
                   const AdamWConstants& c, size_t live, float* m_new, float* v_new, __m256* m_max,
                   __m256* v_max) {
    const __m256i mc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(k.mc)));
    const __m256i vc = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(k.vc)));
    const __m256 m = _mm256_mul_ps(_mm256_i32gather_ps(maps.m, mc, 4), _mm256_set1_ps(m_scale));
    const __m256 v = _mm256_mul_ps(_mm256_i32gather_ps(maps.v, vc, 4), _mm256_set1_ps(v_scale));
    const __m256 g = _mm256_mul_ps(LoadGrad<G>(k.g, 0), _mm256_set1_ps(c.grad_scale));
    const __m256 decayed = _mm256_mul_ps(_mm256_loadu_ps(k.p), _mm256_set1_ps(c.decay));
    const __m256 mi =
        _mm256_fmadd_ps(_mm256_set1_ps(c.b1), m, _mm256_mul_ps(_mm256_set1_ps(c.one_minus_b1), g));
    const __m256 vi = _mm256_fmadd_ps(_mm256_set1_ps(c.b2), v,
                                      _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(c.one_minus_b2), g), g));
    const __m256 denom =
        _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), _mm256_set1_ps(c.sqrt_bc2)), _mm256_set1_ps(c.eps));
    const __m256 r = _mm256_fmadd_ps(_mm256_set1_ps(c.neg_step_size), _mm256_div_ps(mi, denom), decayed);
    _mm256_storeu_ps(k.p, r);
    if constexpr (kOut == 1) _mm256_storeu_ps(static_cast<float*>(k.out), r);
    if constexpr (kOut == 2) _mm_storeu_si128(static_cast<__m128i*>(k.out), ToBf16(r));
    if constexpr (kOut == 3) {
      _mm_storeu_si128(static_cast<__m128i*>(k.out),
                       _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    _mm256_store_ps(m_new, mi);
    _mm256_store_ps(v_new, vi);
    // max(|x|, acc) keeps acc where |x| is NaN or not larger (std::max(acc, |x|)'s choice); dead lanes keep
    // it.
    const __m256 live_lanes = _mm256_castsi256_ps(_mm256_cmpgt_epi32(
        _mm256_set1_epi32(static_cast<int>(live)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    *m_max = _mm256_blendv_ps(*m_max, _mm256_max_ps(_mm256_and_ps(mi, abs_mask), *m_max), live_lanes);
    *v_max = _mm256_blendv_ps(*v_max, _mm256_max_ps(_mm256_and_ps(vi, abs_mask), *v_max), live_lanes);
  }

  static float HorizontalMax(__m256 x) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, x);
    float best = 0.0f;
    for (float l : lanes) best = best < l ? l : best;
    return best;
  }

  static __m256 Load8(const float* x, size_t live) {
    alignas(32) float padded[8] = {};
    std::memcpy(padded, x, live * 4);
    return _mm256_load_ps(padded);
  }

  static void StoreCodes(__m256i codes, uint8_t* out, size_t live) {
    alignas(32) int32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), codes);
    for (size_t k = 0; k < live; ++k) out[k] = static_cast<uint8_t>(lanes[k]);
  }
};

}  // namespace

void AdamWAvx2Body(const AdamWSpans& s, const AdamWConstants& c) { DispatchAdamW<Body>(s, c); }

void AdamW8bitAvx2Body(const AdamW8bitSpans& s, const AdamW8bitMaps& maps, const AdamWConstants& c) {
  DispatchAdamW<Body8bit>(s, maps, c);
}

}  // namespace zerofit::optim::internal
