// SumOfSquares: *out = sum of double(src[i])^2 in two passes. Pass 1: a grid whose size depends only on n
// (not on the GPU) sums a grid-stride slice per thread and reduces each block with a fixed tree into one
// partial; pass 2: one block reduces the partials with the same tree. Every addition happens in the same
// order on every run and every GPU, so the result is deterministic for a given input (it differs from the
// host's index-order sum only by fp64 rounding, ~1e-16 relative per term).
#include "device/cuda/cuda_dtype.cuh"
#include "device/cuda/cuda_kernels.h"

namespace zerofit::device::cuda {
namespace {

constexpr int kReduceThreads = 1024;
constexpr size_t kElementsPerThread = 16;  // keeps small inputs on few blocks

// Fixed-shape tree reduction of `value` over the block; thread 0 gets the block's total.
__device__ double BlockSum(double value, double* shared) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] = __dadd_rn(shared[threadIdx.x], shared[threadIdx.x + half]);
    __syncthreads();
  }
  return shared[0];
}

__global__ void PartialSumsKernel(const void* src, int type, size_t n, double* partials) {
  __shared__ double shared[kReduceThreads];
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  double sum = 0.0;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const double x = LoadAsFloatDev(src, type, i);
    sum = __dadd_rn(sum, __dmul_rn(x, x));
  }
  const double total = BlockSum(sum, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

__global__ void FinalSumKernel(const double* partials, unsigned count, double* out) {
  __shared__ double shared[kReduceThreads];
  const double total = BlockSum(threadIdx.x < count ? partials[threadIdx.x] : 0.0, shared);
  if (threadIdx.x == 0) *out = total;
}

}  // namespace

cudaError_t LaunchSumOfSquares(const void* src, core::DType src_type, size_t n, double* out, double* scratch,
                               cudaStream_t stream) {
  static_assert(kSumOfSquaresMaxBlocks <= kReduceThreads, "pass 2 reduces every partial in one block");
  const size_t per_block = kReduceThreads * kElementsPerThread;
  size_t blocks = (n + per_block - 1) / per_block;
  if (blocks > static_cast<size_t>(kSumOfSquaresMaxBlocks)) blocks = kSumOfSquaresMaxBlocks;
  if (blocks > 0) {
    PartialSumsKernel<<<static_cast<unsigned>(blocks), kReduceThreads, 0, stream>>>(
        src, static_cast<int>(src_type), n, scratch);
    if (cudaError_t rc = cudaGetLastError(); rc != cudaSuccess) return rc;
  }
  FinalSumKernel<<<1, kReduceThreads, 0, stream>>>(scratch, static_cast<unsigned>(blocks), out);
  return cudaGetLastError();
}

}  // namespace zerofit::device::cuda
