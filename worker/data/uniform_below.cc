#include "worker/data/uniform_below.h"

namespace zerofit::data {

uint64_t UniformBelow(std::mt19937_64& gen, uint64_t bound) {
  if (bound <= 1) return 0;
  // 2^64 mod bound, computed without 128-bit arithmetic: (2^64 - bound) mod bound.
  const uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const uint64_t r = gen();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace zerofit::data
