// LibTorch's floating-point scalar types as core::DType (the flat buffers' and kernels' element types).
#pragma once

#include <torch/torch.h>

#include <optional>

#include "core/dtype.h"

namespace zerofit::worker {

// fp32, bf16 and fp16; nullopt for any other type.
inline std::optional<core::DType> CoreElementType(c10::ScalarType t) {
  switch (t) {
    case torch::kFloat32:
      return core::DType::kFloat32;
    case torch::kBFloat16:
      return core::DType::kBFloat16;
    case torch::kFloat16:
      return core::DType::kFloat16;
    default:
      return std::nullopt;
  }
}

}  // namespace zerofit::worker
