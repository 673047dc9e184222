// AdamW with 8-bit blockwise state (bitsandbytes' AdamW8bit, Hugging Face's `optim: adamw_bnb_8bit`): the
// moments m and v are kept as one byte per element and one fp32 scale per block of kQuantBlock elements
// (dynamic_map.h), 2 bytes + 8/256 per element instead of 8. A step dequantises a block's moments, applies
// exactly zerofit's fp32 AdamW (adamw_math.h: the arithmetic of torch.optim.AdamW, which is also what
// bitsandbytes' reference implementation does to the dequantised moments), and quantises the new moments
// against the block's new absmax. The fp32 master weights stay fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "optim/cpu_adamw.h"
#include "optim/dynamic_map.h"

namespace zerofit::optim {

// n elements from a block boundary: m_absmax / v_absmax hold QuantBlocks(n) scales.
struct AdamW8bitSpans {
  float* param = nullptr;  // fp32 master weights
  const void* grad = nullptr;
  core::DType grad_dtype = core::DType::kFloat32;
  uint8_t* m = nullptr;  // codes of the signed map
  uint8_t* v = nullptr;  // codes of the unsigned map
  float* m_absmax = nullptr;
  float* v_absmax = nullptr;
  size_t n = 0;
  void* param_out = nullptr;  // optional: the updated parameter as out_dtype
  core::DType out_dtype = core::DType::kFloat32;
};

// The two maps a step reads, built once by the caller: m's signed, v's unsigned, 256 codes each.
struct AdamW8bitMaps {
  const float* m = nullptr;
  const float* v = nullptr;
};

// The maps built once, on the host.
struct HostAdamW8bitMaps {
  DynamicMap m = MakeDynamicMap(MapKind::kSigned);
  DynamicMap v = MakeDynamicMap(MapKind::kUnsigned);
  AdamW8bitMaps view() const { return AdamW8bitMaps{m.data(), v.data()}; }
  // m's codes then v's, 512 floats: what a device keeps of them (AdamW8bitMaps{p, p + kMapCodes}).
  std::vector<float> Concatenated() const {
    std::vector<float> all(m.begin(), m.end());
    all.insert(all.end(), v.begin(), v.end());
    return all;
  }
};

// One step over every block of `spans` (`step` counts from 1; the gradient is multiplied by grad_scale):
// the scalar oracle.
void CpuAdamW8bit(const AdamW8bitSpans& spans, const AdamW8bitMaps& maps, const AdamWHyper& hyper,
                  int64_t step, float grad_scale);
// The same step with AVX2 (+FMA, F16C) and with AVX-512 (F, BW, VL), bit for bit the oracle; only where
// CPUID says so.
void CpuAdamW8bitAvx2(const AdamW8bitSpans& spans, const AdamW8bitMaps& maps, const AdamWHyper& hyper,
                      int64_t step, float grad_scale);
void CpuAdamW8bitAvx512(const AdamW8bitSpans& spans, const AdamW8bitMaps& maps, const AdamWHyper& hyper,
                        int64_t step, float grad_scale);

using AdamW8bitKernel = void (*)(const AdamW8bitSpans& spans, const AdamW8bitMaps& maps,
                                 const AdamWHyper& hyper, int64_t step, float grad_scale);
// The 8-bit kernel for `level` (scalar, AVX2, AVX-512); InvalidArgument if this CPU cannot run `level`.
absl::StatusOr<AdamW8bitKernel> AdamW8bitKernelFor(SimdLevel level);

// Bitsandbytes keeps fp32 moments for tensors of fewer than min_8bit_size elements (4096 by default: norms,
// biases), where 8-bit state saves little and costs accuracy.
inline constexpr size_t kDefaultMin8bitSize = 4096;

// How an optimizer keeps AdamW's moments: fp32 (8 bytes an element), or 8-bit blockwise for the parameters
// of at least min_8bit_size elements (2 bytes + 8 / kQuantBlock an element).
enum class MomentFormat { kFp32, kBlockwise8bit };
struct MomentOptions {
  MomentFormat format = MomentFormat::kFp32;
  size_t min_8bit_size = kDefaultMin8bitSize;
  bool quantized() const { return format == MomentFormat::kBlockwise8bit; }
};

}  // namespace zerofit::optim
