#include "kernels/swiglu.h"

#include <cmath>

namespace zerofit::kernels {

void SwiGluForwardHost(const void* gate, const void* up, core::DType type, size_t n, void* out) {
  for (size_t i = 0; i < n; ++i) {
    const float g = core::LoadAsFloat(gate, type, i);
    const float s = core::RoundTo(type, g / (1.0f + std::exp(-g)));
    core::StoreFromFloat(out, type, i, s * core::LoadAsFloat(up, type, i));
  }
}

void SwiGluBackwardHost(const void* grad, const void* gate, const void* up, core::DType type, size_t n,
                        void* d_gate, void* d_up) {
  for (size_t i = 0; i < n; ++i) {
    const float d = core::LoadAsFloat(grad, type, i);
    const float g = core::LoadAsFloat(gate, type, i);
    const float one_plus_e = 1.0f + std::exp(-g);  // silu's and its derivative's denominator, once
    if (d_up != nullptr) core::StoreFromFloat(d_up, type, i, d * core::RoundTo(type, g / one_plus_e));
    if (d_gate != nullptr) {
      const float ds = core::RoundTo(type, d * core::LoadAsFloat(up, type, i));
      const float s = 1.0f / one_plus_e;
      core::StoreFromFloat(d_gate, type, i, ds * s * (1.0f + g * (1.0f - s)));
    }
  }
}

}  // namespace zerofit::kernels
