// Picks the instantiation of a SIMD AdamW body for the span's gradient and output dtypes. Included only by
// the SIMD translation units; internal linkage keeps each ISA's instantiations in its own object (see
// adamw_math.h on the ODR).
#pragma once

#include "optim/adamw_math.h"

namespace zerofit::optim::internal {
namespace {

// K<G, kOut>::Run(spans, args...) with kOut: 0 no copy, 1 fp32, 2 bf16, 3 fp16; spans: AdamWSpans or
// AdamW8bitSpans.
template <template <core::DType, int> class K, core::DType G, class Spans, class... Args>
void DispatchOut(const Spans& s, const Args&... args) {
  if (s.param_out == nullptr) return K<G, 0>::Run(s, args...);
  switch (s.out_dtype) {
    case core::DType::kBFloat16:
      return K<G, 2>::Run(s, args...);
    case core::DType::kFloat16:
      return K<G, 3>::Run(s, args...);
    default:
      return K<G, 1>::Run(s, args...);
  }
}

template <template <core::DType, int> class K, class Spans, class... Args>
void DispatchAdamW(const Spans& s, const Args&... args) {
  switch (s.grad_dtype) {
    case core::DType::kBFloat16:
      return DispatchOut<K, core::DType::kBFloat16>(s, args...);
    case core::DType::kFloat16:
      return DispatchOut<K, core::DType::kFloat16>(s, args...);
    default:
      return DispatchOut<K, core::DType::kFloat32>(s, args...);
  }
}

}  // namespace
}  // namespace zerofit::optim::internal
