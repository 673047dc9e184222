// 8-bit blockwise AdamW (optim/adamw_8bit.h's CpuAdamW8bit) on the GPU: a thread block of kThreads (= the
// quantisation block, 256) threads per block of elements, grid-stride over the blocks. Each thread
// dequantises its element's moments (code x block scale), applies adamw.cu's IEEE-rounded AdamWElement, and,
// once the block's new absmax values are reduced in shared memory, quantises them with the host's
// nearest-code search over fp32 midpoints (ties to the lower code). Same operations, same order: codes,
// scales and parameters are bit-identical to the host reference (the max of a block does not depend on the
// order it is taken in).
#include "device/cuda/cuda_dtype.cuh"
#include "device/cuda/cuda_kernels.h"

namespace zerofit::device::cuda {
namespace {

static_assert(kThreads == 256, "one thread per element of a 256-element quantisation block");

// optim::NearestCode: the first midpoint >= scaled gives its lower code; none, the last code.
__device__ __forceinline__ unsigned char NearestCodeDev(const float* map, float scaled) {
  unsigned lo = 0, hi = 255;
  while (lo < hi) {
    const unsigned mid = (lo + hi) / 2;
    if (__fdiv_rn(__fadd_rn(map[mid], map[mid + 1]), 2.0f) >= scaled) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return static_cast<unsigned char>(lo);
}

// optim::QuantizeBlock's scaled value: x * (1 / max(absmax, 1e-38)), clamped as std::clamp does.
__device__ __forceinline__ float ScaledDev(float x, float absmax) {
  const float s = __fmul_rn(x, __fdiv_rn(1.0f, fmaxf(absmax, 1e-38f)));
  return s < -1.0f ? -1.0f : (1.0f < s ? 1.0f : s);
}

__global__ void AdamW8bitKernel(float* param, const void* grad, int grad_type, AdamW8bitState st, size_t n,
                                void* param_out, int out_type, AdamWKernelConstants c) {
  __shared__ float m_map[256];
  __shared__ float v_map[256];
  __shared__ float m_max[256];
  __shared__ float v_max[256];
  const unsigned t = threadIdx.x;
  m_map[t] = st.m_map[t];
  v_map[t] = st.v_map[t];
  __syncthreads();
  for (size_t block = blockIdx.x; block * kThreads < n; block += gridDim.x) {
    const size_t i = block * kThreads + t;
    const bool live = i < n;
    float mi = 0.0f, vi = 0.0f;
    if (live) {
      const float m0 = __fmul_rn(m_map[st.m[i]], st.m_absmax[block]);
      const float v0 = __fmul_rn(v_map[st.v[i]], st.v_absmax[block]);
      const float g = __fmul_rn(LoadAsFloatDev(grad, grad_type, i), c.grad_scale);
      const float decayed = __fmul_rn(param[i], c.decay);
      mi = __fmaf_rn(c.b1, m0, __fmul_rn(c.one_minus_b1, g));
      vi = __fmaf_rn(c.b2, v0, __fmul_rn(__fmul_rn(c.one_minus_b2, g), g));
      const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), c.sqrt_bc2), c.eps);
      const float out = __fmaf_rn(c.neg_step_size, __fdiv_rn(mi, denom), decayed);
      param[i] = out;
      if (param_out != nullptr) StoreFromFloatDev(param_out, out_type, i, out);
    }
    m_max[t] = fabsf(mi);
    v_max[t] = fabsf(vi);
    __syncthreads();  // every thread has read the old scales and written its magnitudes
    for (unsigned s = kThreads / 2; s > 0; s >>= 1) {
      if (t < s) {
        m_max[t] = fmaxf(m_max[t], m_max[t + s]);
        v_max[t] = fmaxf(v_max[t], v_max[t + s]);
      }
      __syncthreads();
    }
    const float m_absmax = m_max[0], v_absmax = v_max[0];
    if (live) {
      st.m[i] = NearestCodeDev(m_map, ScaledDev(mi, m_absmax));
      st.v[i] = NearestCodeDev(v_map, ScaledDev(vi, v_absmax));
    }
    if (t == 0) {
      st.m_absmax[block] = m_absmax;
      st.v_absmax[block] = v_absmax;
    }
    __syncthreads();  // m_max[0] is read by all before the next block overwrites it
  }
}

}  // namespace

cudaError_t LaunchAdamW8bit(float* param, const void* grad, core::DType grad_type, const AdamW8bitState& state,
                            size_t n, void* param_out, core::DType out_type, const AdamWKernelConstants& c,
                            cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  AdamW8bitKernel<<<ElementwiseBlocks(n), kThreads, 0, stream>>>(param, grad, static_cast<int>(grad_type), state,
                                                                 n, param_out, static_cast<int>(out_type), c);
  return cudaGetLastError();
}

}  // namespace zerofit::device::cuda
