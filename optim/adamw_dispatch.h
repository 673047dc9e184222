// Picks the instantiation of a SIMD AdamW body for the span's gradient and output dtypes. Included only by
// the SIMD translation units; internal linkage keeps each ISA's instantiations in its own object (see
// adamw_math.h on the ODR).
#pragma once

#include "optim/adamw_math.h"

namespace zerofit::optim::internal {
namespace {

// K<G, kOut>::Run(spans, constants) with kOut: 0 no copy, 1 fp32, 2 bf16, 3 fp16.
template <template <core::DType, int> class K, core::DType G>
void DispatchOut(const AdamWSpans& s, const AdamWConstants& c) {
  if (s.param_out == nullptr) return K<G, 0>::Run(s, c);
  switch (s.out_dtype) {
    case core::DType::kBFloat16:
      return K<G, 2>::Run(s, c);
    case core::DType::kFloat16:
      return K<G, 3>::Run(s, c);
    default:
      return K<G, 1>::Run(s, c);
  }
}

template <template <core::DType, int> class K>
void DispatchAdamW(const AdamWSpans& s, const AdamWConstants& c) {
  switch (s.grad_dtype) {
    case core::DType::kBFloat16:
      return DispatchOut<K, core::DType::kBFloat16>(s, c);
    case core::DType::kFloat16:
      return DispatchOut<K, core::DType::kFloat16>(s, c);
    default:
      return DispatchOut<K, core::DType::kFloat32>(s, c);
  }
}

}  // namespace
}  // namespace zerofit::optim::internal
