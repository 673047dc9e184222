// Rewards from several sources summed with weights (issue 32: e.g. a verifiable answer and a reward model),
// and each source's statistics for the step's metrics (mean and standard deviation per source).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::rewards {

struct SourceScores {
  std::string name;            // "answer", "rm", ...: the metric names' suffix
  double weight = 1.0;         // finite
  std::vector<double> scores;  // one per completion, every source the same length
};

struct SourceStats {
  std::string name;
  double mean = 0;
  double stddev = 0;  // population (over this batch's completions)
};

struct RewardSum {
  std::vector<double> total;  // per completion: sum over sources of weight x score
  std::vector<SourceStats> sources;
};

// Errors: no source, sources of different lengths, a non-finite weight or score (named by source and index).
absl::StatusOr<RewardSum> SumRewards(const std::vector<SourceScores>& sources);

}  // namespace zerofit::rewards
