// Blockwise 8-bit quantisation of optimizer state (Dettmers et al., "8-bit Optimizers via Block-wise
// Quantization", ICLR 2022; bitsandbytes' AdamW8bit, which Hugging Face's `optim: adamw_bnb_8bit` runs).
//
// A tensor is cut into blocks of kQuantBlock elements from its first element; a block keeps one fp32 scale,
// its largest magnitude (absmax), and one byte per element: the index of the code nearest to x / absmax in a
// 256-entry "dynamic" map. The map (bitsandbytes' create_dynamic_map, transcribed in dynamic_map.cc) spaces
// its codes by decade, 10^-6 to 1, so small values in a block keep their relative precision: AdamW's first
// moment uses the signed map, the second (never negative) the unsigned one, which spends all 256 codes on
// [0, 1]. Quantisation rounds to the nearest code, ties to the smaller (torch.bucketize on the midpoints, as
// bitsandbytes' reference implementation does).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace zerofit::optim {

inline constexpr size_t kQuantBlock = 256;

// 256 codes in ascending order. The functions below take a map as `const float*` to its 256 codes, so that
// a device kernel can read a copy in device memory.
using DynamicMap = std::array<float, 256>;
inline constexpr size_t kMapCodes = 256;

enum class MapKind { kSigned, kUnsigned };

// create_dynamic_map(signed, max_exponent_bits=7, total_bits=8): for decade i = 0..6, the midpoints of
// torch.linspace(0.1, 1, k + 1) in fp32 (k = 2^i signed, 2^(i+1) unsigned) times 10^(i-6), negated too when
// signed; then 0 and 1. Signed: 127 positive, 127 negative, 0 and 1 (the most negative code is -0.993, not
// -1). Unsigned: 254 positive, 0 and 1.
DynamicMap MakeDynamicMap(MapKind kind);

// The index of the code nearest to `scaled` (in [-1, 1]); a value on a midpoint takes the lower code.
uint8_t NearestCode(const float* map, float scaled);

// The scale a block is quantised against when none is given: max |x|.
float BlockAbsMax(const float* x, size_t n);

// The 255 midpoints between neighbouring codes, (map[i] + map[i + 1]) / 2 in fp32: what the nearest-code
// search compares against. A loop over many blocks computes them once and passes them on.
using MapMidpoints = std::array<float, kMapCodes - 1>;
MapMidpoints Midpoints(const float* map);

// codes[i] = NearestCode(x[i] / absmax), the division as bitsandbytes does it: x * (1 / max(absmax, 1e-38)),
// clamped to [-1, 1]. An absmax other than the block's own is allowed (a checkpoint restores its scale).
void QuantizeBlock(const float* map, const float* x, size_t n, float absmax, uint8_t* codes);
void QuantizeBlock(const MapMidpoints& mids, const float* x, size_t n, float absmax, uint8_t* codes);

// out[i] = map[codes[i]] * absmax.
void DequantizeBlock(const float* map, const uint8_t* codes, size_t n, float absmax, float* out);

// Blocks of n elements: ceil(n / kQuantBlock).
inline size_t QuantBlocks(size_t n) { return (n + kQuantBlock - 1) / kQuantBlock; }

// Whole spans: block b covers [b * kQuantBlock, min(n, (b + 1) * kQuantBlock)) and absmax[b] is its scale.
// Quantize computes every block's scale into `absmax`; QuantizeWithScales uses the given ones.
void Quantize(const float* map, const float* x, size_t n, uint8_t* codes, float* absmax);
void QuantizeWithScales(const float* map, const float* x, size_t n, const float* absmax, uint8_t* codes);
void Dequantize(const float* map, const uint8_t* codes, size_t n, const float* absmax, float* out);

}  // namespace zerofit::optim
