// Stand-in for <torch/extension.h>, so that DeepSpeed's csrc/includes/cpu_adam.h compiles without LibTorch
// or pybind11 (bench/deepspeed_cpu_adam_bench.sh puts this folder first on the include path of
// deepspeed_step.cc only). It provides just what cpu_adam.h and simd.h use from it: the c10::Half and
// c10::BFloat16 type names (compared with std::is_same_v; never instantiated with fp32 parameters),
// torch::Tensor (named in declarations only) and the standard headers LibTorch would have pulled in.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace c10 {
struct Half {
  uint16_t x;
};
struct BFloat16 {
  uint16_t x;
};
}  // namespace c10

namespace torch {
class Tensor;
}  // namespace torch
