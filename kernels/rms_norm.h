// Llama/Mistral/Qwen2's RMSNorm as one pass forward and one pass backward over each row, on flat buffers.
//
// The arithmetic is transformers' LlamaRMSNorm (y = w * round(x * rsqrt(mean(x^2) + eps)), in fp32 with the
// two roundings to the element type) and autograd's backward through it, each of autograd's roundings to the
// element type kept. So a fused result differs from the plain graph's only by the order of its sums: the
// row's sum of squares and of dn * x, and for the weight gradient the sum over rows. In fp32 the roundings
// are the identity.
//
// Host references here; kernels/cuda/model_kernels.h launches the same arithmetic on a GPU.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace zerofit::kernels {

// x, y, dy, dx: [rows, cols], contiguous; w, dw: [cols]; rstd: [rows] fp32. Every buffer but rstd has one
// element type, fp32, bf16 or fp16 (x, w, y and the gradients alike; the same for swiglu.h and rope.h).
struct RmsNormShape {
  size_t rows = 0;
  size_t cols = 0;
};

// Forward: per row r = 1 / sqrt(sum(x^2) / cols + eps) in fp32, n = round(x r), y = round(w n);
// rstd[row] = r (what the backward needs besides x and w).
void RmsNormForwardHost(const void* x, const void* w, core::DType type, RmsNormShape shape, float eps,
                        void* y, float* rstd);

// Backward, autograd's arithmetic with its roundings (its fp32 products grouped as here): dn = round(dy w);
// c = sum(dn x) over the row; dx = round(dn r + (c * -0.5 r^3 * 2 / cols) x);
// dw = round(sum over rows of round(dy n)).
// dw may be null (a frozen weight). rstd is the forward's.
void RmsNormBackwardHost(const void* dy, const void* x, const void* w, const float* rstd, core::DType type,
                         RmsNormShape shape, void* dx, void* dw);

// The CUDA backward's weight gradient is summed in two stages: per block of rows into fp32 partials, then
// over the blocks. The partials' count (a function of rows only, so the sums run in the same order on every
// GPU) and the scratch they need in floats.
size_t RmsNormBackwardBlocks(RmsNormShape shape);
size_t RmsNormBackwardScratchFloats(RmsNormShape shape);

}  // namespace zerofit::kernels
