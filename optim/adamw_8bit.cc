#include "optim/adamw_8bit.h"

#include <algorithm>
#include <cmath>

#include "optim/adamw_math.h"

namespace zerofit::optim {
namespace {

// The two maps' midpoints, computed once per step call.
struct Mids {
  MapMidpoints m, v;
};

// One block of len <= kQuantBlock elements at `at`; b = at / kQuantBlock.
void UpdateBlock(const AdamW8bitSpans& s, const AdamW8bitMaps& maps, const Mids& mids,
                 const internal::AdamWConstants& c, size_t at, size_t len) {
  const size_t b = at / kQuantBlock;
  float m[kQuantBlock], v[kQuantBlock];
  DequantizeBlock(maps.m, s.m + at, len, s.m_absmax[b], m);
  DequantizeBlock(maps.v, s.v + at, len, s.v_absmax[b], v);
  for (size_t i = 0; i < len; ++i) {
    const float p = internal::AdamWElement(s.param + at + i, core::LoadAsFloat(s.grad, s.grad_dtype, at + i),
                                           m + i, v + i, c);
    if (s.param_out != nullptr) core::StoreFromFloat(s.param_out, s.out_dtype, at + i, p);
  }
  s.m_absmax[b] = BlockAbsMax(m, len);
  s.v_absmax[b] = BlockAbsMax(v, len);
  QuantizeBlock(mids.m, m, len, s.m_absmax[b], s.m + at);
  QuantizeBlock(mids.v, v, len, s.v_absmax[b], s.v + at);
}

}  // namespace

void CpuAdamW8bit(const AdamW8bitSpans& spans, const AdamW8bitMaps& maps, const AdamWHyper& hyper,
                  int64_t step, float grad_scale) {
  const internal::AdamWConstants c = internal::MakeConstants(hyper, step, grad_scale);
  const Mids mids{Midpoints(maps.m), Midpoints(maps.v)};
  for (size_t at = 0; at < spans.n; at += kQuantBlock) {
    UpdateBlock(spans, maps, mids, c, at, std::min(kQuantBlock, spans.n - at));
  }
}

void CpuAdamW8bitAvx2(const AdamW8bitSpans& spans, const AdamW8bitMaps& maps, const AdamWHyper& hyper,
                      int64_t step, float grad_scale) {
  internal::AdamW8bitAvx2Body(spans, maps, internal::MakeConstants(hyper, step, grad_scale));
}

void CpuAdamW8bitAvx512(const AdamW8bitSpans& spans, const AdamW8bitMaps& maps, const AdamWHyper& hyper,
                        int64_t step, float grad_scale) {
  internal::AdamW8bitAvx512Body(spans, maps, internal::MakeConstants(hyper, step, grad_scale));
}

absl::StatusOr<AdamW8bitKernel> AdamW8bitKernelFor(SimdLevel level) {
  const absl::StatusOr<AdamWKernel> runs = KernelFor(level);  // whether this CPU runs `level`
  if (!runs.ok()) return runs.status();
  switch (level) {
    case SimdLevel::kAvx512:
      return &CpuAdamW8bitAvx512;
    case SimdLevel::kAvx2:
      return &CpuAdamW8bitAvx2;
    case SimdLevel::kScalar:
      break;
  }
  return &CpuAdamW8bit;
}

}  // namespace zerofit::optim
