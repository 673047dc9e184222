// Linked with the CUDA kernels; a build without nvcc links unavailable.cc's false instead.
#include "kernels/cuda/model_kernels.h"

namespace zerofit::kernels::cuda {

bool CudaKernelsBuilt() { return true; }

}  // namespace zerofit::kernels::cuda
