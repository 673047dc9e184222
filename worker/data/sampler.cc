#include "worker/data/sampler.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

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

std::vector<uint64_t> EpochPermutation(uint64_t num_samples, uint64_t seed, uint64_t epoch) {
  std::vector<uint64_t> p(num_samples);
  std::iota(p.begin(), p.end(), uint64_t{0});
  std::mt19937_64 gen(seed + epoch);
  for (uint64_t i = num_samples; i > 1; --i) {
    const uint64_t j = UniformBelow(gen, i);  // in [0, i), i.e. the element at i - 1 swaps with [0, i - 1]
    std::swap(p[i - 1], p[j]);
  }
  return p;
}

Sampler::Sampler(uint64_t num_samples, uint64_t seed) : Sampler(num_samples, seed, SamplerState{}) {}

Sampler::Sampler(uint64_t num_samples, uint64_t seed, SamplerState state)
    : num_samples_(num_samples), seed_(seed), state_(state) {
  Normalize();
}

absl::StatusOr<Sampler> Sampler::Resume(uint64_t num_samples, uint64_t seed, SamplerState state) {
  if (state.offset > num_samples) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampler state offset ", state.offset, " exceeds the ", num_samples,
                     " samples of the dataset (was the checkpoint ", "taken with a different dataset?)"));
  }
  return Sampler(num_samples, seed, state);
}

void Sampler::Normalize() {
  if (num_samples_ == 0) return;
  if (state_.offset == num_samples_) {
    state_.epoch++;
    state_.offset = 0;
  }
  if (perm_.empty() || perm_epoch_ != state_.epoch) {
    perm_ = EpochPermutation(num_samples_, seed_, state_.epoch);
    perm_epoch_ = state_.epoch;
  }
}

std::vector<uint64_t> Sampler::Next(uint64_t n) {
  std::vector<uint64_t> out;
  if (num_samples_ == 0) return out;
  out.reserve(n);
  while (out.size() < n) {
    const uint64_t take = std::min<uint64_t>(n - out.size(), num_samples_ - state_.offset);
    out.insert(out.end(), perm_.begin() + static_cast<std::ptrdiff_t>(state_.offset),
               perm_.begin() + static_cast<std::ptrdiff_t>(state_.offset + take));
    state_.offset += take;
    Normalize();
  }
  return out;
}

}  // namespace zerofit::data
