// An unbiased, platform-independent random integer below a bound, for the data generators
// (examples/make_arith_prefs.cc): std::uniform_int_distribution is implementation-defined (libstdc++ and
// libc++ give different values), std::mt19937_64's output is fixed by the C++ standard, and everything on
// top of it is written here, so a seed gives the same data set on every platform and compiler. A test pins
// a reference sequence. (Training's data order is the step scheduler's: jobspec/step_scheduler.h.)
#pragma once

#include <cstdint>
#include <random>

namespace zerofit::data {

// An unbiased integer in [0, bound) (0 when bound <= 1). Rejection sampling: 64-bit draws below
// 2^64 mod bound are rejected, the rest are reduced mod bound, so every value has exactly the same number of
// preimages.
uint64_t UniformBelow(std::mt19937_64& gen, uint64_t bound);

}  // namespace zerofit::data
