// The Coordinator (no gRPC) with the progress watchdog, on a fake clock: the spec's `watchdog:` section
// sets the limit; step requests are progress; a hung rank fails the attempt with a reason that names its
// host, step and activity; every rank of the failed attempt is then answered `abort` (also once the next
// attempt runs), and their late reports add log lines but no checkpoint, metric or error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coordinator/coordinator.h"
#include "coordinator/job_store.h"
#include "core/clock.h"

namespace zerofit::coordinator {
namespace {

std::string Spec() {
  return "name: w\ntask: reward\nmodel: /m\ndata: /d\nworld_size: 2\nmax_restarts: 2\ntraining:\n"
         "  steps: 100\n  global_batch: 4\n  micro_batch: 1\n  gradient_accumulation: 2\n"
         "watchdog: {step_time_factor: 10, floor_s: 5}\n";
}

struct Fixture {
  Fixture() {
    auto store = JobStore::Open(":memory:");
    EXPECT_TRUE(store.ok()) << store.status();
    JobPolicy policy;
    policy.heartbeat_timeout = absl::Seconds(3);
    auto c = Coordinator::Create(std::move(*store), &clock, policy);
    EXPECT_TRUE(c.ok()) << c.status();
    co = std::move(*c);
    auto submitted = co->Submit("req", "w", Spec(), "w.yaml");
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    job = submitted->job.id;
  }
  int Register() {
    int attempt = 0;
    for (int r = 0; r < 2; ++r) {
      auto reg = co->Register(job, r, 2, r == 0 ? "node-a" : "node-b", std::vector<int64_t>(16, 10));
      EXPECT_TRUE(reg.ok()) << reg.status();
      attempt = reg->attempt;
    }
    return attempt;
  }
  HeartbeatAnswer Beat(int rank, int attempt, const std::string& activity) {
    auto a = co->Heartbeat(job, HeartbeatInfo{rank, attempt, activity});
    EXPECT_TRUE(a.ok()) << a.status();
    return a.value_or(HeartbeatAnswer{});
  }
  core::FakeClock clock;
  std::unique_ptr<Coordinator> co;
  std::string job;
};

TEST(CoordinatorWatchdogTest, AHungRankFailsTheAttemptAndItsRanksAreToldToAbort) {
  Fixture f;
  const int attempt = f.Register();
  ASSERT_EQ(attempt, 1);
  for (int64_t step = 0; step <= 10; ++step) {
    f.clock.Advance(absl::Milliseconds(200));
    for (int r = 0; r < 2; ++r) {
      EXPECT_FALSE(f.Beat(r, attempt, "step: compute").abort);
      ASSERT_TRUE(f.co->AcquireStep(f.job, step, r).ok());
    }
  }
  // Both ranks stop in step 10's all-gather; their heartbeats go on.
  for (int i = 0; i < 6; ++i) {
    f.clock.Advance(absl::Seconds(1));
    for (int r = 0; r < 2; ++r) EXPECT_FALSE(f.Beat(r, attempt, "step 10: all_gather #1 for 1s").abort);
    ASSERT_TRUE(f.co->Tick().ok());
  }
  auto j = f.co->Get(f.job);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->status.phase, JobPhase::kRestarting) << j->status.reason;
  for (const char* want :
       {"all 2 ranks hung", "rank 1 (host node-b): no progress for 6s since it completed step 9",
        "limit 5s = max(10 x median 200ms of the last 20 step times, floor 5s)",
        "it was doing: step 10: all_gather #1"}) {
    EXPECT_NE(j->status.reason.find(want), std::string::npos) << want << "\n" << j->status.reason;
  }
  // The failed attempt's ranks: abort, now and after the next attempt formed.
  EXPECT_TRUE(f.Beat(1, attempt, "").abort);
  EXPECT_TRUE(f.Beat(1, attempt, "").cancel);
  EXPECT_FALSE(f.Beat(1, 0, "").abort) << "an older worker without an attempt is not told to abort";
  ASSERT_EQ(f.Register(), 2);
  EXPECT_TRUE(f.Beat(0, attempt, "").abort);
  EXPECT_FALSE(f.Beat(0, 2, "").abort);
  // A late report of attempt 1: its lines are logged, its checkpoint and failure are not taken.
  WorkerReport late;
  late.rank = 1;
  late.attempt = 1;
  late.host = "node-b";
  late.log_lines = {"aborted by the coordinator in step 10: all_gather #1"};
  late.checkpoint_step = 10;
  late.finished = true;
  late.exit_code = 86;
  ASSERT_TRUE(f.co->Report(f.job, late).ok());
  j = f.co->Get(f.job);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->status.phase, JobPhase::kRunning) << j->status.reason;
  EXPECT_EQ(j->status.checkpoint_step, -1);
  auto logs = f.co->WaitLogs(f.job, 0, absl::ZeroDuration());
  ASSERT_TRUE(logs.ok());
  bool logged = false;
  for (const LogLine& l : *logs) logged |= l.text == late.log_lines[0] && l.source == "node-b:1";
  EXPECT_TRUE(logged);
}

TEST(CoordinatorWatchdogTest, ASlowRankThatKeepsAskingForStepsIsNotHung) {
  Fixture f;
  const int attempt = f.Register();
  for (int64_t step = 0; step <= 20; ++step) {
    // 4 s per step, under the 5 s floor, with heartbeats every second in between.
    for (int i = 0; i < 4; ++i) {
      f.clock.Advance(absl::Seconds(1));
      for (int r = 0; r < 2; ++r) EXPECT_FALSE(f.Beat(r, attempt, "step: compute").abort);
      ASSERT_TRUE(f.co->Tick().ok());
    }
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(f.co->AcquireStep(f.job, step, r).ok());
  }
  auto j = f.co->Get(f.job);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->status.phase, JobPhase::kRunning) << j->status.reason;
}

TEST(CoordinatorWatchdogTest, ALongActivityIsCutAtACharacterBoundary) {
  Fixture f;
  const int attempt = f.Register();
  std::string e_acute_150;
  for (int i = 0; i < 150; ++i) e_acute_150 += "\xC3\xA9";
  // 301 bytes: the 256th byte (index 255) ends a character, the 257th continues one: 255 bytes are kept.
  const std::string activity = "x" + e_acute_150;
  for (int i = 0; i < 6; ++i) {
    f.clock.Advance(absl::Seconds(1));
    for (int r = 0; r < 2; ++r) f.Beat(r, attempt, activity);
    ASSERT_TRUE(f.co->Tick().ok());
  }
  auto j = f.co->Get(f.job);
  ASSERT_TRUE(j.ok());
  const std::string kept = activity.substr(0, 255);
  const size_t at = j->status.reason.find("it was doing: " + kept);
  ASSERT_NE(at, std::string::npos) << j->status.reason;
  const std::string after = j->status.reason.substr(at + 14 + kept.size(), 3);
  EXPECT_EQ(after, " | ") << "the activity ends there";
}

TEST(CoordinatorWatchdogTest, ACorruptReportIsRefusedWithAClearErrorKeptInTheJobsLog) {
  Fixture f;
  const int attempt = f.Register();
  WorkerReport corrupt;
  corrupt.rank = 1;
  corrupt.attempt = attempt;
  corrupt.host = "node-b";
  corrupt.step = 0;
  corrupt.named = {{"loss", 0.5}, {"corrupt metric!", 1.0}};
  corrupt.checkpoint_step = 0;
  const absl::Status refused = f.co->Report(f.job, corrupt);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("'corrupt metric!'"), std::string::npos) << refused;
  auto j = f.co->Get(f.job);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->status.phase, JobPhase::kRunning);
  EXPECT_EQ(j->status.checkpoint_step, -1) << "nothing of a refused report takes effect";
  auto logs = f.co->WaitLogs(f.job, 0, absl::ZeroDuration());
  ASSERT_TRUE(logs.ok());
  bool logged = false;
  for (const LogLine& l : *logs) logged |= l.text.find("refused a report of node-b:1: ") == 0;
  EXPECT_TRUE(logged);
}

}  // namespace
}  // namespace zerofit::coordinator
