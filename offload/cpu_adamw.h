// CPU AdamW on raw spans (decoupled weight decay, Loshchilov & Hutter), bit-for-bit the arithmetic of
// torch::optim::AdamW (LibTorch 1.13) up to float rounding of the fused expressions. This header includes
// nothing heavy: it is used by the ZeRO-2 driver (sharding/) and the offload pipeline.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace zerofit::offload {

struct AdamWHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 1e-2f;
};

// One AdamW update of n elements, in place on fp32 `param` (the master weights), `m` and `v`.
//   g      = grad[i] * grad_scale            (grad_scale folds loss-normalisation, unscaling and clipping)
//   param *= 1 - lr * weight_decay
//   m      = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
//   param -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// `step` counts from 1. If `param_out` is non-null, the updated parameter is also written there converted to
// `out_dtype` (e.g. the bf16 model copy). Spans must not overlap (except param_out may alias param when
// out_dtype is fp32).
void CpuAdamWScalar(float* param, const float* grad, float* m, float* v, size_t n, const AdamWHyper& hyper,
                    int64_t step, float grad_scale, void* param_out = nullptr,
                    core::DType out_dtype = core::DType::kFloat32);

}  // namespace zerofit::offload
