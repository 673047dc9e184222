#include "client/retry_policy.h"

#include <algorithm>
#include <cmath>

namespace zerofit::client {

absl::Duration BackoffDelay(const RetryPolicy& p, int retry, double unit_random) {
  const double initial_s = absl::ToDoubleSeconds(p.initial_backoff);
  const double max_s = absl::ToDoubleSeconds(p.max_backoff);
  // pow() overflows to +inf for large `retry`; min() then holds it at max_backoff.
  const double exponential_s = initial_s * std::pow(std::max(1.0, p.multiplier), std::max(0, retry));
  const double d = std::min(max_s, exponential_s);
  const double jitter = std::clamp(p.jitter, 0.0, 1.0);
  const double u = std::clamp(unit_random, 0.0, 1.0);
  return absl::Seconds(d * (1.0 - jitter * u));
}

}  // namespace zerofit::client
