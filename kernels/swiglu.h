// SwiGLU's gating, silu(gate) * up, as one element-wise pass forward and one backward, on flat buffers.
//
// The arithmetic is the plain graph's (torch.nn.functional.silu, then the product) with each of its roundings
// to the element type kept, and autograd's backward through it: element by element, no sums, so a fused
// result equals the plain graph's up to the exponential's last bit on the device that computes it.
//
// Host references here; kernels/cuda/model_kernels.h launches the same arithmetic on a GPU.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace zerofit::kernels {

// out = round(round(silu(gate)) * up), silu(g) = g / (1 + exp(-g)); n elements of `type`
// (fp32, bf16 or fp16).
void SwiGluForwardHost(const void* gate, const void* up, core::DType type, size_t n, void* out);

// Given the product's gradient `grad`: d_up = round(grad * round(silu(gate))); d_gate = silu's backward of
// round(grad * up): round(d * s (1 + g (1 - s))), s = 1 / (1 + exp(-g)). Either output may be null.
void SwiGluBackwardHost(const void* grad, const void* gate, const void* up, core::DType type, size_t n,
                        void* d_gate, void* d_up);

}  // namespace zerofit::kernels
