// Kernels for emulation_test.cc, in CUDA's own syntax (they go through the same rewrite as device/cuda and
// kernels/cuda): one correct block reduction with shared memory, warp shuffles and barriers, and kernels
// with the faults the emulation must report.
#include "tests/cuda_emulation/test_kernels.h"

namespace zerofit::cuda_emulation::test {
namespace {

// out[block] = sum over the block's threads of in[block * blockDim.x + thread], a tree in shared memory
// after a warp-shuffle pass; each block also checks that its shared memory is its own.
__global__ void BlockSumKernel(const float* in, float* out, int* foreign) {
  __shared__ float partial[32];
  __shared__ unsigned owner[1];
  const unsigned t = threadIdx.x, lane = t % 32, warp = t / 32;
  if (t == 0) owner[0] = blockIdx.x;
  float v = in[blockIdx.x * blockDim.x + t];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (t == 0) {
    float total = 0.0f;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) total += partial[w];
    out[blockIdx.x] = total;
    if (owner[0] != blockIdx.x) *foreign = 1;
  }
}

// Threads below `cut` return before the barrier the others wait at.
__global__ void DivergentBarrierKernel(unsigned cut) {
  if (threadIdx.x < cut) return;
  __syncthreads();
}

// Thread 0 writes a shared value that every thread reads, with no barrier between: a data race.
__global__ void RacyKernel(float* out) {
  __shared__ float value[1];
  if (threadIdx.x == 0) value[0] = 1.0f;
  out[threadIdx.x] = value[0];
}

// Reads one float through `p`.
__global__ void ReadKernel(const float* p, float* out) { *out = *p; }

}  // namespace

cudaError_t LaunchBlockSum(const float* in, float* out, int* foreign, unsigned blocks, unsigned threads,
                           cudaStream_t stream) {
  BlockSumKernel<<<blocks, threads, 0, stream>>>(in, out, foreign);
  return cudaGetLastError();
}

cudaError_t LaunchDivergentBarrier(unsigned threads, unsigned cut, cudaStream_t stream) {
  DivergentBarrierKernel<<<1, threads, 0, stream>>>(cut);
  return cudaGetLastError();
}

cudaError_t LaunchRacy(float* out, unsigned threads, cudaStream_t stream) {
  RacyKernel<<<1, threads, 0, stream>>>(out);
  return cudaGetLastError();
}

cudaError_t LaunchRead(const float* p, float* out, cudaStream_t stream) {
  ReadKernel<<<1, 1, 0, stream>>>(p, out);
  return cudaGetLastError();
}

}  // namespace zerofit::cuda_emulation::test
