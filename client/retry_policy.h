// When a failed coordinator call is tried again: exponential backoff with jitter, within a total budget.
// Pure (the random draw is an argument), so the schedule's bounds are unit-tested without sleeping.
#pragma once

#include "absl/time/time.h"

namespace zerofit::client {

// Whether a call may be sent again after UNAVAILABLE. UNAVAILABLE does not prove the server never saw the
// request (a coordinator killed between applying it and answering), so only calls whose repetition has the
// effect of one call are retried. Every call site names its kind: there is no default.
enum class Idempotency {
  kIdempotent,     // reads, keyed writes (Submit's request id), per-step grants, heartbeats: retried
  kNotIdempotent,  // counted events (a launcher's exit, an interruption), Cancel: sent once
};

struct RetryPolicy {
  absl::Duration initial_backoff = absl::Milliseconds(100);
  double multiplier = 2.0;
  absl::Duration max_backoff = absl::Seconds(5);
  // Each wait is drawn uniformly from [(1 - jitter) * d, d], d the exponential delay: ranks that lost the
  // coordinator together do not come back in lockstep. In [0, 1].
  double jitter = 0.5;
  // No retry starts later than this after the first attempt started (zero: never retry).
  absl::Duration budget = absl::Minutes(1);
};

// The wait before retry number `retry` (0: the first retry), `unit_random` drawn uniformly from [0, 1).
// Never above policy.max_backoff, never below (1 - jitter) * min(max_backoff, initial * multiplier^retry).
absl::Duration BackoffDelay(const RetryPolicy& policy, int retry, double unit_random);

}  // namespace zerofit::client
