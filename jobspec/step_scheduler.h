// Which samples every rank trains on at every step, as a pure function of (lengths, options, step): the
// coordinator hands it out through AcquireStep, and a restart from the checkpoint of step S simply continues
// with step S + 1 (no sample of an epoch is repeated or skipped, whatever the world size of either attempt).
//
// Epoch e is a seeded permutation of all samples (SplitMix64 + Fisher-Yates, the same on every platform).
// Step k of the epoch takes the next global_batch samples of it (the last step of an epoch takes what is
// left, so every sample is used exactly once per epoch). Inside a step the samples go to ranks longest first,
// each to the rank with the fewest tokens so far among those below their count quota (LPT: token loads differ
// by at most one sample's length); then each rank sorts its samples by length and cuts them into
// gradient_accumulation consecutive groups, so a micro-batch packs similar lengths (less padding). A sample
// is a whole preference pair, never split.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::jobspec {

struct SchedulerOptions {
  int64_t global_batch = 64;  // samples per optimizer step, all ranks together
  int world_size = 1;
  int gradient_accumulation = 1;  // per rank per step (gradient accumulation)
  uint64_t seed = 1234;
};

struct StepAssignment {
  int64_t global_step = 0;  // 0-based, across epochs
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  // [rank][micro-batch] -> sample indices
  std::vector<std::vector<std::vector<uint64_t>>> ranks;
  std::vector<int64_t> rank_tokens;  // tokens each rank got this step
};

class StepScheduler {
 public:
  // `lengths[i]`: tokens of sample i (for a pair: prompt + chosen + rejected). All > 0.
  static absl::StatusOr<StepScheduler> Create(std::vector<int64_t> lengths, const SchedulerOptions& options);

  int64_t num_samples() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t steps_per_epoch() const;
  StepAssignment Assign(int64_t global_step) const;

 private:
  StepScheduler(std::vector<int64_t> lengths, const SchedulerOptions& options)
      : lengths_(std::move(lengths)), options_(options) {}
  std::vector<uint64_t> EpochOrder(int64_t epoch) const;

  std::vector<int64_t> lengths_;
  SchedulerOptions options_;
};

}  // namespace zerofit::jobspec
