#include "client/retry_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace zerofit::client {
namespace {

absl::Duration Exponential(const RetryPolicy& p, int retry) {
  return std::min(p.max_backoff, p.initial_backoff * std::pow(p.multiplier, retry));
}

TEST(BackoffDelay, StaysWithinTheJitterBandOfTheExponentialDelay) {
  RetryPolicy p;
  p.initial_backoff = absl::Milliseconds(100);
  p.multiplier = 2;
  p.max_backoff = absl::Seconds(5);
  p.jitter = 0.5;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  for (int retry = 0; retry < 40; ++retry) {
    const absl::Duration d = Exponential(p, retry);
    for (int i = 0; i < 200; ++i) {
      const absl::Duration wait = BackoffDelay(p, retry, u01(rng));
      EXPECT_LE(wait, d) << "retry " << retry;
      EXPECT_GE(wait, d * (1 - p.jitter)) << "retry " << retry;
      EXPECT_LE(wait, p.max_backoff);
    }
  }
}

TEST(BackoffDelay, GrowsExponentiallyUpToTheCap) {
  RetryPolicy p;
  p.jitter = 0.5;
  EXPECT_EQ(BackoffDelay(p, 0, 0.0), absl::Milliseconds(100));
  EXPECT_EQ(BackoffDelay(p, 1, 0.0), absl::Milliseconds(200));
  EXPECT_EQ(BackoffDelay(p, 3, 0.0), absl::Milliseconds(800));
  EXPECT_EQ(BackoffDelay(p, 6, 0.0), absl::Seconds(5));     // 6.4 s capped
  EXPECT_EQ(BackoffDelay(p, 5000, 0.0), absl::Seconds(5));  // no overflow
  EXPECT_EQ(BackoffDelay(p, 5000, 0.999999), absl::Seconds(5) * (1 - 0.5 * 0.999999));
  for (int retry = 0; retry < 30; ++retry)
    EXPECT_LE(BackoffDelay(p, retry, 0.3), BackoffDelay(p, retry + 1, 0.3)) << retry;
}

TEST(BackoffDelay, NoJitterIsDeterministicAndOutOfRangeInputsAreClamped) {
  RetryPolicy p;
  p.jitter = 0;
  EXPECT_EQ(BackoffDelay(p, 2, 0.0), BackoffDelay(p, 2, 0.9));
  p.jitter = 3;  // clamped to 1: waits in [0, d]
  EXPECT_GE(BackoffDelay(p, 2, 0.99), absl::ZeroDuration());
  EXPECT_EQ(BackoffDelay(p, -4, 0.0), p.initial_backoff);
  EXPECT_GE(BackoffDelay(p, 2, 7.0), absl::ZeroDuration());
}

}  // namespace
}  // namespace zerofit::client
