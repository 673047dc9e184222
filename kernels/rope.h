// Rotary position embedding in Llama's rotate-half form, as one element-wise pass forward and one backward,
// on flat buffers.
//
// x is [batch, seq, heads, head_dim] (the projection's output before the heads move forward), the angles'
// cos and sin [angle_batch, seq, head_dim] with angle_batch 1 (one table for every row: training) or batch
// (each row its own positions: decoding). The arithmetic is transformers' q * cos + rotate_half(q) * sin with
// each of its roundings to the element type (the two products, their sum), and autograd's backward through
// it (dy * cos, and the rotation's transpose of dy * sin, summed): element by element, no sums over elements
// and no transcendental functions, so a fused result equals the plain graph's bit for bit on any device that
// rounds IEEE products and sums (the CUDA kernel uses __fmul_rn and __fadd_rn: no contraction).
//
// Host references here; kernels/cuda/model_kernels.h launches the same arithmetic on a GPU.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace zerofit::kernels {

struct RopeShape {
  size_t batch = 0, seq = 0, heads = 0, head_dim = 0;  // head_dim even
  bool per_row_angles = false;                         // angle_batch == batch (else 1)
  size_t elements() const { return batch * seq * heads * head_dim; }
};

// y[j] = round(round(x[j] cos[j]) + round(r[j] sin[j])), r = (-x[j + d/2] for j < d/2, x[j - d/2] after).
void RopeForwardHost(const void* x, const void* cos, const void* sin, core::DType type, RopeShape shape,
                     void* y);

// dx[j] = round(round(dy[j] cos[j]) + t[j]), t the rotation's transpose of g = round(dy sin):
// (g[j + d/2] for j < d/2, -g[j - d/2] after).
void RopeBackwardHost(const void* dy, const void* cos, const void* sin, core::DType type, RopeShape shape,
                      void* dx);

}  // namespace zerofit::kernels
