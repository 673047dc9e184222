#include "kernels/rope.h"

namespace zerofit::kernels {
namespace {

// The angles' element for x's element (b, t, h, j).
size_t AngleIndex(const RopeShape& s, size_t b, size_t t, size_t j) {
  return ((s.per_row_angles ? b : 0) * s.seq + t) * s.head_dim + j;
}

// Calls f(base, angle_base) for each head vector: x's offset and the angles' offset of its first element.
template <typename F>
void ForEachHead(const RopeShape& s, F&& f) {
  for (size_t b = 0; b < s.batch; ++b)
    for (size_t t = 0; t < s.seq; ++t)
      for (size_t h = 0; h < s.heads; ++h)
        f(((b * s.seq + t) * s.heads + h) * s.head_dim, AngleIndex(s, b, t, 0));
}

}  // namespace

void RopeForwardHost(const void* x, const void* cos, const void* sin, core::DType type, RopeShape shape,
                     void* y) {
  const size_t half = shape.head_dim / 2;
  ForEachHead(shape, [&](size_t base, size_t angles) {
    for (size_t j = 0; j < shape.head_dim; ++j) {
      const float v = core::LoadAsFloat(x, type, base + j);
      const float r = j < half ? -core::LoadAsFloat(x, type, base + j + half)
                               : core::LoadAsFloat(x, type, base + j - half);
      const float a = core::RoundTo(type, v * core::LoadAsFloat(cos, type, angles + j));
      const float b = core::RoundTo(type, r * core::LoadAsFloat(sin, type, angles + j));
      core::StoreFromFloat(y, type, base + j, a + b);
    }
  });
}

void RopeBackwardHost(const void* dy, const void* cos, const void* sin, core::DType type, RopeShape shape,
                      void* dx) {
  const size_t half = shape.head_dim / 2;
  ForEachHead(shape, [&](size_t base, size_t angles) {
    auto g = [&](size_t j) {
      return core::RoundTo(type,
                           core::LoadAsFloat(dy, type, base + j) * core::LoadAsFloat(sin, type, angles + j));
    };
    for (size_t j = 0; j < shape.head_dim; ++j) {
      const float a = core::RoundTo(
          type, core::LoadAsFloat(dy, type, base + j) * core::LoadAsFloat(cos, type, angles + j));
      const float t = j < half ? g(j + half) : -g(j - half);
      core::StoreFromFloat(dx, type, base + j, a + t);
    }
  });
}

}  // namespace zerofit::kernels
