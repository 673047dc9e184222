// Following a stream (a job's logs or metrics, with --follow) across coordinator restarts. A stream is not
// retried as a whole (what it delivered would be delivered again); instead the caller's `follow` opens a new
// one that starts after the last item it handed on, so every item arrives exactly once.
//
//   int64_t last = 0;
//   absl::Status s = client::FollowAcrossRestarts(policy, [&](bool* progressed) {
//     return client.StreamLogs(job, last, ..., [&](const LogLine& l) { print(l); last = l.seq(); *progressed
//     = true; });
//   });
#pragma once

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/retry_policy.h"

namespace zerofit::client {

struct ReconnectPolicy {
  // The waits between attempts while the coordinator is away: capped, jittered (retry_policy.h). The retry
  // counter starts again once a stream delivers something.
  RetryPolicy backoff{absl::Milliseconds(200), 2.0, absl::Seconds(5), 0.5, absl::InfiniteDuration()};
  // Give up when no stream has delivered anything or ended cleanly for this long (an outage, not a pause).
  absl::Duration give_up_after = absl::Minutes(3);
};

// What the loop needs from outside, so that tests run it without sleeping. Defaults: absl::SleepFor, a
// uniform [0, 1) draw, absl::Now.
struct ReconnectEnv {
  std::function<void(absl::Duration)> sleep;
  std::function<double()> unit_random;
  std::function<absl::Time()> now;
  // Told before each wait: the error that ended the last attempt, how long until the next one, and which
  // retry of this outage it is (0: the coordinator was just lost; say so once, not at every retry).
  std::function<void(const absl::Status& why, absl::Duration wait, int retry)> on_retry;
};

// Calls `follow` until it returns OK or an error other than UNAVAILABLE (the coordinator went away, or is
// shutting down). `follow` sets *progressed when its stream handed on at least one item. Once
// policy.give_up_after has passed without progress, returns UNAVAILABLE naming the last error and how long
// it tried (the last wait is shortened to end at that limit).
absl::Status FollowAcrossRestarts(const ReconnectPolicy& policy,
                                  const std::function<absl::Status(bool* progressed)>& follow,
                                  ReconnectEnv env = {});

}  // namespace zerofit::client
