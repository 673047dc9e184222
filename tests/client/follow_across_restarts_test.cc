// Following a stream across coordinator restarts: UNAVAILABLE is followed again with capped, jittered waits;
// progress restarts the outage clock; an outage longer than the limit is a clear error; other errors end at
// once. Time is simulated (no sleeping).
#include "client/follow_across_restarts.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zerofit::client {
namespace {

struct FakeEnv {
  absl::Time now = absl::FromUnixSeconds(1000);
  std::vector<absl::Duration> waits;
  ReconnectEnv env() {
    ReconnectEnv e;
    e.sleep = [this](absl::Duration d) {
      waits.push_back(d);
      now += d;
    };
    e.now = [this] { return now; };
    e.unit_random = [] { return 0.5; };
    return e;
  }
};

TEST(FollowAcrossRestartsTest, FollowsAgainAfterUnavailableUntilTheStreamEnds) {
  FakeEnv fake;
  int calls = 0;
  std::vector<int> retries;
  ReconnectEnv env = fake.env();
  env.on_retry = [&](const absl::Status& why, absl::Duration, int retry) {
    EXPECT_EQ(why.message(), "Socket closed");
    retries.push_back(retry);
  };
  const absl::Status s = FollowAcrossRestarts(
      ReconnectPolicy{},
      [&](bool*) {
        ++calls;
        return calls < 4 ? absl::UnavailableError("Socket closed") : absl::OkStatus();
      },
      env);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(retries, (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(fake.waits.size(), 3u);
  for (size_t i = 1; i < fake.waits.size(); ++i) EXPECT_GE(fake.waits[i], fake.waits[i - 1]);
  for (absl::Duration w : fake.waits) EXPECT_LE(w, ReconnectPolicy{}.backoff.max_backoff);
}

TEST(FollowAcrossRestartsTest, GivesUpAfterTheOutageLimitNamingTheLastError) {
  FakeEnv fake;
  ReconnectPolicy policy;
  policy.give_up_after = absl::Seconds(30);
  int calls = 0;
  const absl::Status s = FollowAcrossRestarts(
      policy,
      [&](bool*) {
        ++calls;
        return absl::UnavailableError("connection refused");
      },
      fake.env());
  ASSERT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("gave up following after"), std::string::npos) << s;
  EXPECT_NE(s.message().find("--reconnect-timeout"), std::string::npos) << s;
  EXPECT_NE(s.message().find("connection refused"), std::string::npos) << s;
  EXPECT_EQ(fake.now - absl::FromUnixSeconds(1000), policy.give_up_after)
      << "the last wait ends at the limit";
  EXPECT_GE(fake.now - absl::FromUnixSeconds(1000), policy.give_up_after - policy.backoff.max_backoff);
  EXPECT_GT(calls, 5);
}

TEST(FollowAcrossRestartsTest, ProgressRestartsTheOutageClockAndTheBackoff) {
  FakeEnv fake;
  ReconnectPolicy policy;
  policy.give_up_after = absl::Seconds(10);
  int calls = 0;
  // Each stream delivers something and then loses the coordinator for 8 s: never 10 s without progress.
  const absl::Status s = FollowAcrossRestarts(
      policy,
      [&](bool* progressed) {
        ++calls;
        if (calls == 20) return absl::OkStatus();
        *progressed = true;
        fake.now += absl::Seconds(8);
        return absl::UnavailableError("the coordinator is shutting down");
      },
      fake.env());
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls, 20);
  for (absl::Duration w : fake.waits) EXPECT_LE(w, policy.backoff.initial_backoff) << "backoff not reset";
}

TEST(FollowAcrossRestartsTest, OtherErrorsEndAtOnce) {
  FakeEnv fake;
  int calls = 0;
  const absl::Status s = FollowAcrossRestarts(
      ReconnectPolicy{},
      [&](bool*) {
        ++calls;
        return absl::NotFoundError("no job 'x'");
      },
      fake.env());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(fake.waits.empty());
}

}  // namespace
}  // namespace zerofit::client
