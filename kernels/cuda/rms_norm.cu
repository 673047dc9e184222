// RMSNorm forward and backward (kernels/rms_norm.h's arithmetic).
//
// Forward: one block a row; the row's sum of squares is reduced by a fixed tree (warp shuffles, then the
// warps' partials), then each thread writes its columns. The row is read twice, the second time from cache.
// Backward: a fixed number of blocks (RmsNormBackwardBlocks: a function of the row count only) walk the rows
// with a stride; per row the same tree reduces sum(dn x) and each thread writes its columns of dx. A thread
// owns the same columns in every row its block visits, so it adds round(dy n) into its block's fp32 partial
// of the weight gradient without any atomics; a second kernel sums the partials over the blocks in block
// order. Every sum runs in the same order on every run and GPU for a given shape.
#include "kernels/cuda/element.cuh"
#include "kernels/cuda/model_kernels.h"

namespace zerofit::kernels::cuda {
namespace {

constexpr int kThreads = 256;  // a multiple of 32, at most 32 warps
constexpr int kWarps = kThreads / 32;

// The block's sum of `value`, in a fixed order; every thread gets it. `shared`: kWarps floats.
__device__ float BlockSum(float value, float* shared) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  float total = lane < kWarps ? shared[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
  return total;
}

template <typename T>
__global__ void RmsNormForwardKernel(const T* x, const T* w, size_t cols, float eps, T* y, float* rstd) {
  __shared__ float shared[kWarps];
  const size_t base = static_cast<size_t>(blockIdx.x) * cols;
  float sum = 0.0f;
  for (size_t j = threadIdx.x; j < cols; j += kThreads) {
    const float v = ToFloat(x[base + j]);
    sum += v * v;
  }
  const float r = rsqrtf(BlockSum(sum, shared) / static_cast<float>(cols) + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = r;
  for (size_t j = threadIdx.x; j < cols; j += kThreads) {
    const float n = Round<T>(ToFloat(x[base + j]) * r);
    y[base + j] = FromFloat<T>(ToFloat(w[j]) * n);
  }
}

template <typename T>
__global__ void RmsNormBackwardKernel(const T* dy, const T* x, const T* w, const float* rstd, size_t rows,
                                      size_t cols, T* dx, float* dw_partial) {
  __shared__ float shared[kWarps];
  const float two_over_cols = 2.0f / static_cast<float>(cols);
  float* partial = dw_partial != nullptr ? dw_partial + static_cast<size_t>(blockIdx.x) * cols : nullptr;
  bool first = true;
  for (size_t row = blockIdx.x; row < rows; row += gridDim.x, first = false) {
    const size_t base = row * cols;
    const float r = rstd[row];
    float c = 0.0f;
    for (size_t j = threadIdx.x; j < cols; j += kThreads)
      c += Round<T>(ToFloat(dy[base + j]) * ToFloat(w[j])) * ToFloat(x[base + j]);
    const float k = BlockSum(c, shared) * -0.5f * (r * r * r) * two_over_cols;
    for (size_t j = threadIdx.x; j < cols; j += kThreads) {
      const float g = ToFloat(dy[base + j]);
      const float xv = ToFloat(x[base + j]);
      const float dn = Round<T>(g * ToFloat(w[j]));
      dx[base + j] = FromFloat<T>(dn * r + k * xv);
      if (partial != nullptr) {
        const float term = Round<T>(g * Round<T>(xv * r));
        partial[j] = first ? term : partial[j] + term;
      }
    }
  }
}

template <typename T>
__global__ void SumPartialsKernel(const float* partial, size_t blocks, size_t cols, T* dw) {
  const size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  float sum = 0.0f;
  for (size_t b = 0; b < blocks; ++b) sum += partial[b * cols + j];
  dw[j] = FromFloat<T>(sum);
}

}  // namespace

const char* LaunchRmsNormForward(const void* x, const void* w, core::DType type, RmsNormShape shape,
                                 float eps, void* y, float* rstd, void* stream) {
  if (shape.rows == 0 || shape.cols == 0) return nullptr;
  if (shape.rows > 0x7fffffffu) return ErrorText(cudaErrorInvalidValue);
  return ErrorText(DispatchElementType(type, [&](auto tag) {
    using T = decltype(tag);
    RmsNormForwardKernel<T>
        <<<static_cast<unsigned>(shape.rows), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
            static_cast<const T*>(x), static_cast<const T*>(w), shape.cols, eps, static_cast<T*>(y), rstd);
    return cudaGetLastError();
  }));
}

const char* LaunchRmsNormBackward(const void* dy, const void* x, const void* w, const float* rstd,
                                  core::DType type, RmsNormShape shape, void* dx, void* dw, float* scratch,
                                  void* stream) {
  if (shape.rows == 0 || shape.cols == 0) return nullptr;
  if (dw != nullptr && scratch == nullptr) return ErrorText(cudaErrorInvalidValue);
  const size_t blocks = RmsNormBackwardBlocks(shape);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  return ErrorText(DispatchElementType(type, [&](auto tag) {
    using T = decltype(tag);
    RmsNormBackwardKernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(
        static_cast<const T*>(dy), static_cast<const T*>(x), static_cast<const T*>(w), rstd, shape.rows,
        shape.cols, static_cast<T*>(dx), dw != nullptr ? scratch : nullptr);
    if (cudaError_t rc = cudaGetLastError(); rc != cudaSuccess || dw == nullptr) return rc;
    const unsigned grid = static_cast<unsigned>((shape.cols + kThreads - 1) / kThreads);
    SumPartialsKernel<T><<<grid, kThreads, 0, s>>>(scratch, blocks, shape.cols, static_cast<T*>(dw));
    return cudaGetLastError();
  }));
}

}  // namespace zerofit::kernels::cuda
