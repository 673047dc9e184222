#include <cmath>

#include "offload/cpu_adamw.h"

namespace zerofit::offload {

void CpuAdamWScalar(float* param, const float* grad, float* m, float* v, size_t n, const AdamWHyper& hyper,
                    int64_t step, float grad_scale, void* param_out, core::DType out_dtype) {
  // Scalars are formed in double and rounded to float once, as ATen does when it applies a double Scalar to a
  // float tensor.
  const double lr = hyper.lr;
  const float decay = static_cast<float>(1.0 - lr * static_cast<double>(hyper.weight_decay));
  const float b1 = hyper.beta1;
  const float b2 = hyper.beta2;
  const float one_minus_b1 = static_cast<float>(1.0 - static_cast<double>(hyper.beta1));
  const float one_minus_b2 = static_cast<float>(1.0 - static_cast<double>(hyper.beta2));
  const double bc1 = 1.0 - std::pow(static_cast<double>(hyper.beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(hyper.beta2), static_cast<double>(step));
  const float sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
  const float neg_step_size = static_cast<float>(-(lr / bc1));
  const float eps = hyper.eps;
  for (size_t i = 0; i < n; ++i) {
    const float g = grad[i] * grad_scale;
    float p = param[i] * decay;
    const float mi = m[i] * b1 + one_minus_b1 * g;
    const float vi = v[i] * b2 + one_minus_b2 * g * g;
    const float denom = std::sqrt(vi) / sqrt_bc2 + eps;
    p = p + neg_step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
    param[i] = p;
  }
  if (param_out != nullptr) core::ConvertElements(param, core::DType::kFloat32, param_out, out_dtype, n);
}

}  // namespace zerofit::offload
