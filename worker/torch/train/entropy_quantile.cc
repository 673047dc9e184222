#include "worker/torch/train/entropy_quantile.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/dtype.h"
#include "core/status_macros.h"

namespace zerofit::worker {

double LinearQuantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const auto below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (values[above] - values[below]) * (position - static_cast<double>(below));
}

std::vector<double> ScoredEntropies(const std::vector<Completion>& completions, bool mask_truncated) {
  std::vector<double> out;
  for (const Completion& c : completions) {
    if (mask_truncated && c.hit_max_new_tokens) continue;
    out.insert(out.end(), c.entropies.begin(), c.entropies.end());
  }
  return out;
}

absl::StatusOr<std::optional<double>> StepEntropyThreshold(const std::vector<double>& local,
                                                           double top_quantile, comm::Communicator* comm) {
  const absl::Duration timeout = comm->options().timeout;
  double longest = static_cast<double>(local.size());
  ZF_RETURN_IF_ERROR(comm::WaitFor(
      comm->AllReduce(comm::Buffer{&longest, 1, core::DType::kFloat64}, comm::ReduceOp::kMax), timeout));
  const auto width = static_cast<size_t>(longest);
  if (width == 0) return std::optional<double>();
  std::vector<double> mine(width, -1.0), all(width * static_cast<size_t>(comm->world_size()));
  std::copy(local.begin(), local.end(), mine.begin());
  ZF_RETURN_IF_ERROR(
      comm::WaitFor(comm->AllGather(comm::Buffer{mine.data(), width, core::DType::kFloat64},
                                    comm::Buffer{all.data(), all.size(), core::DType::kFloat64}),
                    timeout));
  all.erase(std::remove(all.begin(), all.end(), -1.0), all.end());  // the padding; entropies are >= 0
  return std::optional<double>(LinearQuantile(std::move(all), 1.0 - top_quantile));
}

}  // namespace zerofit::worker
