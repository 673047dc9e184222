#include "client/follow_across_restarts.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace zerofit::client {

absl::Status FollowAcrossRestarts(const ReconnectPolicy& policy,
                                  const std::function<absl::Status(bool* progressed)>& follow,
                                  ReconnectEnv env) {
  if (!env.sleep) env.sleep = [](absl::Duration d) { absl::SleepFor(d); };
  if (!env.now) env.now = [] { return absl::Now(); };
  if (!env.unit_random) {
    env.unit_random = [engine = std::mt19937_64(std::random_device{}())]() mutable {
      return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
    };
  }
  absl::Time last_progress = env.now();
  int retry = 0;
  while (true) {
    bool progressed = false;
    const absl::Status s = follow(&progressed);
    if (s.ok() || s.code() != absl::StatusCode::kUnavailable) return s;
    if (progressed) {
      last_progress = env.now();
      retry = 0;
    }
    const absl::Duration away = env.now() - last_progress;
    if (away >= policy.give_up_after) {
      return absl::UnavailableError(absl::StrCat(
          "gave up following after ", absl::FormatDuration(absl::Trunc(away, absl::Milliseconds(1))),
          " without the coordinator (--reconnect-timeout to wait longer); last error: ", s.message()));
    }
    const absl::Duration wait =
        std::min(BackoffDelay(policy.backoff, retry, env.unit_random()), policy.give_up_after - away);
    if (env.on_retry) env.on_retry(s, wait, retry);
    ++retry;
    env.sleep(wait);
  }
}

}  // namespace zerofit::client
