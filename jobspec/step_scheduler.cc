#include "jobspec/step_scheduler.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zerofit::jobspec {
namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, n) without modulo bias (rejection sampling).
uint64_t Below(uint64_t& state, uint64_t n) {
  const uint64_t limit = ~uint64_t{0} - ~uint64_t{0} % n;
  uint64_t x;
  do {
    x = SplitMix64(state);
  } while (x >= limit);
  return x % n;
}

}  // namespace

absl::StatusOr<StepScheduler> StepScheduler::Create(std::vector<int64_t> lengths, const SchedulerOptions& o) {
  if (lengths.empty()) return absl::InvalidArgumentError("StepScheduler: no samples");
  if (o.global_batch < 1) return absl::InvalidArgumentError("StepScheduler: global_batch must be >= 1");
  if (o.world_size < 1) return absl::InvalidArgumentError("StepScheduler: world_size must be >= 1");
  if (o.gradient_accumulation < 1)
    return absl::InvalidArgumentError("StepScheduler: gradient_accumulation must be >= 1");
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("StepScheduler: sample ", i, " has length ", lengths[i]));
    }
  }
  return StepScheduler(std::move(lengths), o);
}

int64_t StepScheduler::steps_per_epoch() const {
  return (num_samples() + options_.global_batch - 1) / options_.global_batch;
}

std::vector<uint64_t> StepScheduler::EpochOrder(int64_t epoch) const {
  std::vector<uint64_t> order(lengths_.size());
  std::iota(order.begin(), order.end(), uint64_t{0});
  uint64_t state = options_.seed * 0x100000001B3ull + static_cast<uint64_t>(epoch);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[Below(state, i)]);
  return order;
}

StepAssignment StepScheduler::Assign(int64_t global_step) const {
  StepAssignment a;
  a.global_step = global_step;
  a.epoch = global_step / steps_per_epoch();
  a.step_in_epoch = global_step % steps_per_epoch();
  const std::vector<uint64_t> order = EpochOrder(a.epoch);
  const size_t begin = static_cast<size_t>(a.step_in_epoch * options_.global_batch);
  const size_t end = std::min(order.size(), begin + static_cast<size_t>(options_.global_batch));
  std::vector<uint64_t> step(order.begin() + static_cast<std::ptrdiff_t>(begin),
                             order.begin() + static_cast<std::ptrdiff_t>(end));
  // Longest first; ties by index so the result never depends on the sort implementation.
  std::sort(step.begin(), step.end(), [&](uint64_t x, uint64_t y) {
    return lengths_[x] != lengths_[y] ? lengths_[x] > lengths_[y] : x < y;
  });
  const size_t world = static_cast<size_t>(options_.world_size);
  const size_t quota = (step.size() + world - 1) / world;
  std::vector<std::vector<uint64_t>> per_rank(world);
  a.rank_tokens.assign(world, 0);
  // Min-heap of (tokens, rank) over ranks still below their quota: O(B log W) per step.
  using Load = std::pair<int64_t, size_t>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> open;
  for (size_t r = 0; r < world; ++r) open.push({0, r});
  for (uint64_t s : step) {
    const size_t best = open.top().second;
    open.pop();
    per_rank[best].push_back(s);
    a.rank_tokens[best] += lengths_[s];
    if (per_rank[best].size() < quota) open.push({a.rank_tokens[best], best});
  }
  const size_t k = static_cast<size_t>(options_.gradient_accumulation);
  a.ranks.resize(world);
  for (size_t r = 0; r < world; ++r) {
    std::vector<uint64_t>& mine = per_rank[r];
    std::sort(mine.begin(), mine.end(), [&](uint64_t x, uint64_t y) {
      return lengths_[x] != lengths_[y] ? lengths_[x] < lengths_[y] : x < y;
    });
    a.ranks[r].resize(k);
    for (size_t m = 0; m < k; ++m) {
      const size_t lo = mine.size() * m / k, hi = mine.size() * (m + 1) / k;
      a.ranks[r][m].assign(mine.begin() + static_cast<std::ptrdiff_t>(lo),
                           mine.begin() + static_cast<std::ptrdiff_t>(hi));
    }
  }
  return a;
}

}  // namespace zerofit::jobspec
