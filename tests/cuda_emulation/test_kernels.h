// Launchers of test_kernels.cu (emulation_test.cc).
#pragma once

#include <cuda_runtime_api.h>

namespace zerofit::cuda_emulation::test {

// out[b] = the sum of in[b * threads .. (b + 1) * threads); *foreign set when a block saw another's shared
// memory. threads: a multiple of 32, at most 1024.
cudaError_t LaunchBlockSum(const float* in, float* out, int* foreign, unsigned blocks, unsigned threads,
                           cudaStream_t stream);
// A barrier that the threads below `cut` never reach.
cudaError_t LaunchDivergentBarrier(unsigned threads, unsigned cut, cudaStream_t stream);
// out[t] = a shared value that thread 0 writes, without the barrier that would order it (a race).
cudaError_t LaunchRacy(float* out, unsigned threads, cudaStream_t stream);
// *out = *p.
cudaError_t LaunchRead(const float* p, float* out, cudaStream_t stream);

}  // namespace zerofit::cuda_emulation::test
