#include "worker/rewards/reward_sum.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace zerofit::rewards {
namespace {

absl::Status Check(const std::vector<SourceScores>& sources) {
  if (sources.empty()) return absl::InvalidArgumentError("SumRewards: no reward source");
  for (const SourceScores& s : sources) {
    if (s.scores.size() != sources[0].scores.size()) {
      return absl::InvalidArgumentError(absl::StrCat("reward source '", s.name, "' scored ", s.scores.size(),
                                                     " completions, '", sources[0].name, "' ",
                                                     sources[0].scores.size()));
    }
    if (!std::isfinite(s.weight)) {
      return absl::InvalidArgumentError(absl::StrCat("reward source '", s.name, "': weight is not finite"));
    }
    for (size_t i = 0; i < s.scores.size(); ++i) {
      if (!std::isfinite(s.scores[i])) {
        return absl::InvalidArgumentError(
            absl::StrCat("reward source '", s.name, "' gave completion ", i, " a non-finite score"));
      }
    }
  }
  return absl::OkStatus();
}

SourceStats StatsOf(const SourceScores& s) {
  SourceStats st;
  st.name = s.name;
  if (s.scores.empty()) return st;
  const double n = static_cast<double>(s.scores.size());
  for (double x : s.scores) st.mean += x / n;
  double var = 0;
  for (double x : s.scores) var += (x - st.mean) * (x - st.mean) / n;
  st.stddev = std::sqrt(var);
  return st;
}

}  // namespace

absl::StatusOr<RewardSum> SumRewards(const std::vector<SourceScores>& sources) {
  if (absl::Status s = Check(sources); !s.ok()) return s;
  RewardSum out;
  out.total.assign(sources[0].scores.size(), 0.0);
  for (const SourceScores& s : sources) {
    for (size_t i = 0; i < s.scores.size(); ++i) out.total[i] += s.weight * s.scores[i];
    out.sources.push_back(StatsOf(s));
  }
  return out;
}

}  // namespace zerofit::rewards
