// Bounds on floating-point rounding error that follow from the computation (issue 29: a tolerance must hold
// for any summation order, so for whatever BLAS kernels a CPU picks), for the tiny Llama-family models the
// tests build.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/hf_config.h"

namespace zerofit::test_support {

// A first-order bound on the rounding error of a float32 forward of `c` over `seq_len` tokens, relative to
// the largest output magnitude: the standard dot-product bound (n u for a sum of n products, u = 2^-24)
// summed over the reductions on the longest path from the embedding to an output (per layer q/k/v, q.k over
// head_dim, attention weights over the sequence, o_proj, gate/up, down_proj; then the head). It scales with
// the model and the sequence and holds for any summation order; a wrong formula (a head mapping, a rotary
// angle, a missing bias, the wrong token read) moves outputs by far more.
inline double Float32ForwardBound(const core::HfModelConfig& c, int64_t seq_len, double max_abs_output) {
  const double u = std::ldexp(1.0, -24);
  const int64_t per_layer = 3 * c.hidden_size + c.head_dim + seq_len + c.num_attention_heads * c.head_dim +
                            2 * c.hidden_size + c.intermediate_size;
  const int64_t n = c.num_hidden_layers * per_layer + c.hidden_size;
  return static_cast<double>(n) * u * std::max(1.0, max_abs_output);
}

}  // namespace zerofit::test_support
