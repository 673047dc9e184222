#include "kernels/rms_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace zerofit::kernels {
namespace {

// The CUDA backward's blocks of rows (kernels/cuda/rms_norm.cu): enough to fill a GPU (1024 blocks of 256
// threads: all 2048 thread slots of 128 SMs, an H100's 132 nearly), few enough that the partials stay small
// ([blocks, cols] fp32: 8 MiB at hidden 2048) and their final sum short.
constexpr size_t kBackwardMaxBlocks = 1024;

}  // namespace

void RmsNormForwardHost(const void* x, const void* w, core::DType type, RmsNormShape shape, float eps,
                        void* y, float* rstd) {
  for (size_t row = 0; row < shape.rows; ++row) {
    const size_t base = row * shape.cols;
    float sum = 0.0f;
    for (size_t j = 0; j < shape.cols; ++j) {
      const float v = core::LoadAsFloat(x, type, base + j);
      sum += v * v;
    }
    const float r = 1.0f / std::sqrt(sum / static_cast<float>(shape.cols) + eps);
    rstd[row] = r;
    for (size_t j = 0; j < shape.cols; ++j) {
      const float n = core::RoundTo(type, core::LoadAsFloat(x, type, base + j) * r);
      core::StoreFromFloat(y, type, base + j, core::LoadAsFloat(w, type, j) * n);
    }
  }
}

void RmsNormBackwardHost(const void* dy, const void* x, const void* w, const float* rstd, core::DType type,
                         RmsNormShape shape, void* dx, void* dw) {
  std::vector<float> dw_sum(dw != nullptr ? shape.cols : 0, 0.0f);
  const float two_over_cols = 2.0f / static_cast<float>(shape.cols);
  for (size_t row = 0; row < shape.rows; ++row) {
    const size_t base = row * shape.cols;
    const float r = rstd[row];
    float c = 0.0f;
    for (size_t j = 0; j < shape.cols; ++j) {
      const float dn =
          core::RoundTo(type, core::LoadAsFloat(dy, type, base + j) * core::LoadAsFloat(w, type, j));
      c += dn * core::LoadAsFloat(x, type, base + j);
    }
    const float k = c * -0.5f * (r * r * r) * two_over_cols;
    for (size_t j = 0; j < shape.cols; ++j) {
      const float g = core::LoadAsFloat(dy, type, base + j);
      const float xv = core::LoadAsFloat(x, type, base + j);
      const float dn = core::RoundTo(type, g * core::LoadAsFloat(w, type, j));
      core::StoreFromFloat(dx, type, base + j, dn * r + k * xv);
      if (dw != nullptr) dw_sum[j] += core::RoundTo(type, g * core::RoundTo(type, xv * r));
    }
  }
  for (size_t j = 0; j < dw_sum.size(); ++j) core::StoreFromFloat(dw, type, j, dw_sum[j]);
}

size_t RmsNormBackwardBlocks(RmsNormShape shape) { return std::min(shape.rows, kBackwardMaxBlocks); }

size_t RmsNormBackwardScratchFloats(RmsNormShape shape) { return RmsNormBackwardBlocks(shape) * shape.cols; }

}  // namespace zerofit::kernels
