// Deterministic, resumable shuffling of sample indices.
//
// The permutation of epoch e is a Fisher-Yates shuffle of [0, num_samples) driven by
// std::mt19937_64(seed + e) (unsigned wrap-around) and UniformBelow below:
//   for i = n-1 down to 1: j = UniformBelow(gen, i + 1); swap(p[i], p[j])
// std::mt19937_64's output is fixed by the C++ standard, and everything on top of it is written here, so
// the sequence is identical on every platform and compiler. (std::shuffle and
// std::uniform_int_distribution are implementation-defined: libstdc++ and libc++ give different orders.)
// Changing any of this changes every training run's data order; tests pin a reference sequence.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::data {

// An unbiased integer in [0, bound) (bound >= 1). Rejection sampling: 64-bit draws below 2^64 mod bound are
// rejected, the rest are reduced mod bound, so every value has exactly the same number of preimages.
uint64_t UniformBelow(std::mt19937_64& gen, uint64_t bound);

// The permutation epoch `epoch` visits (see the file comment).
std::vector<uint64_t> EpochPermutation(uint64_t num_samples, uint64_t seed, uint64_t epoch);

// Position in the infinite stream of epochs: the next index returned is EpochPermutation(epoch)[offset].
// Saved with a checkpoint; normalized so that offset < num_samples (an exhausted epoch reads as the next one
// at offset 0).
struct SamplerState {
  uint64_t epoch = 0;
  uint64_t offset = 0;
  bool operator==(const SamplerState& o) const { return epoch == o.epoch && offset == o.offset; }
};

// Not thread-safe (Next mutates); one per data-loading loop.
class Sampler {
 public:
  // Starts at epoch 0, offset 0. num_samples == 0 gives a sampler whose Next returns nothing.
  Sampler(uint64_t num_samples, uint64_t seed);
  // Resumes from a saved state: the future sequence equals that of the sampler the state was taken from.
  // InvalidArgument when state.offset > num_samples.
  static absl::StatusOr<Sampler> Resume(uint64_t num_samples, uint64_t seed, SamplerState state);

  // The next n indices, crossing into the next epoch (reshuffled with seed + epoch) when one runs out. Every
  // index appears exactly once per epoch.
  std::vector<uint64_t> Next(uint64_t n);

  SamplerState state() const { return state_; }
  uint64_t num_samples() const { return num_samples_; }
  uint64_t seed() const { return seed_; }

 private:
  Sampler(uint64_t num_samples, uint64_t seed, SamplerState state);
  void Normalize();  // offset == num_samples -> next epoch; rebuilds perm_ when the epoch changed

  uint64_t num_samples_;
  uint64_t seed_;
  SamplerState state_;
  std::vector<uint64_t> perm_;  // EpochPermutation for state_.epoch
  uint64_t perm_epoch_ = 0;     // which epoch perm_ holds (valid when !perm_.empty())
};

}  // namespace zerofit::data
