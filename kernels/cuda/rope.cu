// Rotary position embedding forward and backward (kernels/rope.h's arithmetic): one thread an element, the
// products and sums IEEE-rounded one by one (no contraction), so every value is the reference's.
#include "kernels/cuda/element.cuh"
#include "kernels/cuda/model_kernels.h"

namespace zerofit::kernels::cuda {
namespace {

struct Geometry {
  size_t seq, heads, head_dim, angle_batch_stride;  // the angles' stride between rows (0: one table)
};

// The angles' offset of element i of x.
__device__ __forceinline__ size_t AngleOffset(size_t i, const Geometry& g) {
  const size_t j = i % g.head_dim;
  const size_t row = i / g.head_dim / g.heads;  // b * seq + t
  return (row / g.seq) * g.angle_batch_stride + (row % g.seq) * g.head_dim + j;
}

// Forward: y = round(round(x cos) + round(r sin)), r the rotation of x; backward (kBackward): dx =
// round(round(dy cos) + t), t the rotation's transpose of round(dy sin), whose partner element has its own
// angle.
template <typename T, bool kBackward>
__global__ void RopeKernel(const T* in, const T* cos, const T* sin, size_t n, Geometry g, T* out) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t half = g.head_dim / 2;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const size_t j = i % g.head_dim, angle = AngleOffset(i, g);
    const bool low = j < half;
    const size_t partner = low ? i + half : i - half;
    const float a = Round<T>(__fmul_rn(ToFloat(in[i]), ToFloat(cos[angle])));
    float b;
    if constexpr (kBackward) {
      const float gp =
          Round<T>(__fmul_rn(ToFloat(in[partner]), ToFloat(sin[low ? angle + half : angle - half])));
      b = low ? gp : -gp;
    } else {
      const float r = low ? -ToFloat(in[partner]) : ToFloat(in[partner]);
      b = Round<T>(__fmul_rn(r, ToFloat(sin[angle])));
    }
    out[i] = FromFloat<T>(__fadd_rn(a, b));
  }
}

Geometry GeometryOf(const RopeShape& s) {
  return {s.seq, s.heads, s.head_dim, s.per_row_angles ? s.seq * s.head_dim : 0};
}

template <bool kBackward>
const char* LaunchRope(const void* in, const void* cos, const void* sin, core::DType type, RopeShape shape,
                       void* out, void* stream) {
  const size_t n = shape.elements();
  if (n == 0) return nullptr;
  if (shape.head_dim % 2 != 0) return ErrorText(cudaErrorInvalidValue);
  return ErrorText(DispatchElementType(type, [&](auto tag) {
    using T = decltype(tag);
    RopeKernel<T, kBackward>
        <<<ElementwiseBlocks(n), kElementwiseThreads, 0, static_cast<cudaStream_t>(stream)>>>(
            static_cast<const T*>(in), static_cast<const T*>(cos), static_cast<const T*>(sin), n,
            GeometryOf(shape), static_cast<T*>(out));
    return cudaGetLastError();
  }));
}

}  // namespace

const char* LaunchRopeForward(const void* x, const void* cos, const void* sin, core::DType type,
                              RopeShape shape, void* y, void* stream) {
  return LaunchRope<false>(x, cos, sin, type, shape, y, stream);
}

const char* LaunchRopeBackward(const void* dy, const void* cos, const void* sin, core::DType type,
                               RopeShape shape, void* dx, void* stream) {
  return LaunchRope<true>(dy, cos, sin, type, shape, dx, stream);
}

}  // namespace zerofit::kernels::cuda
