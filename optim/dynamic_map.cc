#include "optim/dynamic_map.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace zerofit::optim {
namespace {

// torch.linspace(start, end, steps) in fp32 as ATen's CPU kernel computes it: the step in fp32, the first
// half counted up from start, the second half down from end.
std::vector<float> LinspaceF32(float start, float end, int steps) {
  std::vector<float> out(static_cast<size_t>(steps));
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int halfway = steps / 2;
  for (int i = 0; i < steps; ++i) {
    out[static_cast<size_t>(i)] =
        i < halfway ? start + step * static_cast<float>(i) : end - step * static_cast<float>(steps - i - 1);
  }
  return out;
}

}  // namespace

DynamicMap MakeDynamicMap(MapKind kind) {
  const bool is_signed = kind == MapKind::kSigned;
  constexpr int kExponentBits = 7;
  std::vector<float> data;
  for (int i = 0; i < kExponentBits; ++i) {
    const int items = (1 << (is_signed ? i : i + 1)) + 1;
    const std::vector<float> bounds = LinspaceF32(0.1f, 1.0f, items);
    // Python's 10 ** (i - 6) times the fp32 midpoint, in double, rounded to fp32 by torch.tensor.
    const double scale = std::pow(10.0, static_cast<double>(i - (kExponentBits - 1)));
    for (size_t k = 0; k + 1 < bounds.size(); ++k) {
      const float mean = (bounds[k] + bounds[k + 1]) / 2.0f;
      data.push_back(static_cast<float>(scale * static_cast<double>(mean)));
      if (is_signed) data.push_back(static_cast<float>(-scale * static_cast<double>(mean)));
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  DynamicMap map{};
  std::copy(data.begin(), data.end(), map.begin());
  return map;
}

uint8_t NearestCode(const float* map, float scaled) {
  // The first midpoint (map[i] + map[i + 1]) / 2 >= scaled gives code i; none: the last code.
  size_t lo = 0, hi = kMapCodes - 1;  // the answer lies in [lo, hi]
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if ((map[mid] + map[mid + 1]) / 2.0f >= scaled) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return static_cast<uint8_t>(lo);
}

float BlockAbsMax(const float* x, size_t n) {
  float m = 0.0f;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

namespace {

// NearestCode's answer without branches, against the map's midpoints: the number of midpoints m with
// !(m >= scaled), found by halving (the midpoints ascend, so those form a prefix; a NaN counts them all, as
// NearestCode's search ends on the last code). Eight dependent loads instead of eight unpredictable
// branches: the scalar 8-bit step went from 11.5 to 60.7 Mparam/s on one thread (BENCHMARKS.md "8-bit AdamW
// moments with offload").
uint8_t CountBelow(const float* mids, float scaled) {
  size_t at = 0;
  for (size_t half = kMapCodes / 2; half > 0; half /= 2) {
    at += !(mids[at + half - 1] >= scaled) ? half : 0;
  }
  return static_cast<uint8_t>(at);
}

}  // namespace

MapMidpoints Midpoints(const float* map) {
  MapMidpoints mids;
  for (size_t i = 0; i < mids.size(); ++i) mids[i] = (map[i] + map[i + 1]) / 2.0f;
  return mids;
}

void QuantizeBlock(const MapMidpoints& mids, const float* x, size_t n, float absmax, uint8_t* codes) {
  const float inv = 1.0f / std::max(absmax, 1e-38f);
  for (size_t i = 0; i < n; ++i) codes[i] = CountBelow(mids.data(), std::clamp(x[i] * inv, -1.0f, 1.0f));
}

void QuantizeBlock(const float* map, const float* x, size_t n, float absmax, uint8_t* codes) {
  QuantizeBlock(Midpoints(map), x, n, absmax, codes);
}

void DequantizeBlock(const float* map, const uint8_t* codes, size_t n, float absmax, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = map[codes[i]] * absmax;
}

void Quantize(const float* map, const float* x, size_t n, uint8_t* codes, float* absmax) {
  const MapMidpoints mids = Midpoints(map);
  for (size_t b = 0; b * kQuantBlock < n; ++b) {
    const size_t at = b * kQuantBlock, len = std::min(kQuantBlock, n - at);
    absmax[b] = BlockAbsMax(x + at, len);
    QuantizeBlock(mids, x + at, len, absmax[b], codes + at);
  }
}

void QuantizeWithScales(const float* map, const float* x, size_t n, const float* absmax, uint8_t* codes) {
  const MapMidpoints mids = Midpoints(map);
  for (size_t b = 0; b * kQuantBlock < n; ++b) {
    const size_t at = b * kQuantBlock;
    QuantizeBlock(mids, x + at, std::min(kQuantBlock, n - at), absmax[b], codes + at);
  }
}

void Dequantize(const float* map, const uint8_t* codes, size_t n, const float* absmax, float* out) {
  for (size_t b = 0; b * kQuantBlock < n; ++b) {
    const size_t at = b * kQuantBlock;
    DequantizeBlock(map, codes + at, std::min(kQuantBlock, n - at), absmax[b], out + at);
  }
}

}  // namespace zerofit::optim
