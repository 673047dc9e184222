// The few element-wise kernels the engine runs on a device, with their host references. The host and test
// devices run these functions; the CUDA device has a `.cu` kernel for each, tested against them.
// Counts are ELEMENTS; pointers are the device's memory (host memory on the host and test devices).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "optim/adamw_8bit.h"
#include "optim/cpu_adamw.h"

namespace zerofit::device {

// One AdamW update of n elements, optim/cpu_adamw.h's (the formula there; `step` counts from 1): the spans
// (fp32 master `param`, `m`, `v` in place, gradient of grad_dtype, and, if param_out is not null, the updated
// parameter written as out_dtype in the same pass) are the device's memory; the gradient is multiplied by
// grad_scale.
struct AdamWArgs {
  optim::AdamWSpans spans;
  optim::AdamWHyper hyper;
  int64_t step = 1;
  float grad_scale = 1.0f;
};

// One 8-bit blockwise AdamW update (optim/adamw_8bit.h) of spans.n elements from a block boundary: codes,
// block scales, master weights and gradient in the device's memory, and the two dynamic maps (256 codes each)
// too.
struct AdamW8bitArgs {
  optim::AdamW8bitSpans spans;
  optim::AdamW8bitMaps maps;
  optim::AdamWHyper hyper;
  int64_t step = 1;
  float grad_scale = 1.0f;
};

// Host references (also what the host and test devices run).
void HostFill(void* dst, uint8_t value, size_t bytes);
// acc[i] += scale * src[i]; with scale == 1 exactly acc[i] + src[i] (bit-identical to
// core::AccumulateToFloat).
void HostAccumulate(const void* src, core::DType src_type, float* acc, size_t n, float scale);
// *out = sum of src[i]^2 in fp64: the SumOfSquaresChunk of each kSumOfSquaresChunk elements, added in chunk
// order. A caller that computes the chunks on several threads and adds them in order gets the same bits.
void HostSumOfSquares(const float* src, size_t n, double* out);
// The same over n elements of `dtype` (fp32, bf16 or fp16), each widened exactly to fp32.
void HostSumOfSquares(const void* src, core::DType dtype, size_t n, double* out);
inline constexpr size_t kSumOfSquaresChunk = size_t{1} << 16;
// sum of src[i]^2 (n <= kSumOfSquaresChunk) over 8 interleaved fp64 lanes (lane i % 8), combined pairwise:
// eight independent additions in flight instead of one chain of n (the fp64 add latency bounded the old loop
// at ~4 cycles an element: a second for a 0.75B-element gradient shard).
double SumOfSquaresChunk(const float* src, size_t n);
// The same sum of n elements of `dtype` (fp32, bf16 or fp16), each widened exactly to fp32 as it is read: the
// bits SumOfSquaresChunk gives on the converted elements, without converting them into memory first.
double SumOfSquaresChunk(const void* src, core::DType dtype, size_t n);
void HostConvert(const void* src, core::DType src_type, void* dst, core::DType dst_type, size_t n);
// The best SIMD kernel of this CPU, bit-identical to the scalar oracle (optim/adamw_math.h).
void HostAdamW(const AdamWArgs& args);
// optim::CpuAdamW8bit.
void HostAdamW8bit(const AdamW8bitArgs& args);

}  // namespace zerofit::device
