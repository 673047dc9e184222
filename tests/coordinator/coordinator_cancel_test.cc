// Cancelling a running job (issue 29), through the Coordinator on a fake clock: every rank stops at one step
// boundary, the step after the highest one any rank holds, as after a preemption. A rank one step behind its
// peers still gets the step they hold (they wait for it in that step's collectives); from the stop step on
// every rank is refused with `cancel`. Ranks that still heartbeat the job's cancel_grace after the cancel are
// told to abort; so are ranks of a job cancelled while no attempt ran (no stop step was agreed).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coordinator/coordinator.h"
#include "coordinator/job_store.h"
#include "core/clock.h"

namespace zerofit::coordinator {
namespace {

std::string CancelSpec() {
  return "name: c\ntask: reward\nmodel: /m\ndata: /d\nworld_size: 2\nmax_restarts: 2\ntraining:\n"
         "  steps: 100\n  global_batch: 4\n  micro_batch: 1\n  gradient_accumulation: 2\n";
}

struct CancelFixture {
  CancelFixture() {
    auto store = JobStore::Open(":memory:");
    EXPECT_TRUE(store.ok()) << store.status();
    auto c = Coordinator::Create(std::move(*store), &clock);
    EXPECT_TRUE(c.ok()) << c.status();
    co = std::move(*c);
    auto submitted = co->Submit("req", "c", CancelSpec(), "c.yaml");
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    job = submitted->job.id;
  }
  int Register(int rank) {
    auto reg = co->Register(job, rank, 2, rank == 0 ? "node-a" : "node-b", std::vector<int64_t>(16, 10));
    EXPECT_TRUE(reg.ok()) << reg.status();
    return reg.ok() ? reg->attempt : 0;
  }
  StepGrant Acquire(int rank, int64_t step) {
    auto g = co->AcquireStep(job, step, rank);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.value_or(StepGrant{});
  }
  // Asks for steps from `from` on as a rank does (the next one after each grant) until one is refused with
  // `cancel`; returns that step (-1 if none was within 10 steps).
  int64_t StopStep(int rank, int64_t from) {
    for (int64_t step = from; step < from + 10; ++step) {
      const StepGrant g = Acquire(rank, step);
      if (g.cancel) return step;
      EXPECT_TRUE(g.assignment) << "rank " << rank << ", step " << step;
    }
    return -1;
  }
  HeartbeatAnswer Beat(int rank, int attempt) {
    auto a = co->Heartbeat(job, HeartbeatInfo{rank, attempt, "step: compute"});
    EXPECT_TRUE(a.ok()) << a.status();
    return a.value_or(HeartbeatAnswer{});
  }
  std::string Log() {
    auto lines = co->WaitLogs(job, 0, absl::ZeroDuration());
    std::string text;
    if (lines.ok())
      for (const LogLine& l : *lines) text += l.text + "\n";
    return text;
  }
  core::FakeClock clock;
  std::unique_ptr<Coordinator> co;
  std::string job;
};

// The defect of issue 29: rank 0 already held step 5 (and waited in its reduce-scatter) when the cancel came;
// rank 1, one step behind, was refused step 5 and left, so rank 0 waited until the collective deadline.
TEST(CoordinatorCancelTest, EveryRankStopsAtTheSameStepAfterACancel) {
  CancelFixture f;
  f.Register(0);
  ASSERT_EQ(f.Register(1), 1);
  for (int64_t step = 0; step <= 5; ++step) ASSERT_TRUE(f.Acquire(0, step).assignment);
  for (int64_t step = 0; step <= 4; ++step) ASSERT_TRUE(f.Acquire(1, step).assignment);
  auto cancelled = f.co->Cancel(f.job, "");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->status.phase, JobPhase::kCancelled);
  EXPECT_NE(f.Log().find("cancelled: cancelled by the user; ranks stop before step 6"), std::string::npos)
      << f.Log();
  ASSERT_TRUE(f.co->Cancel(f.job, "again").ok()) << "idempotent";
  const StepGrant behind = f.Acquire(1, 5);
  ASSERT_TRUE(behind.assignment) << "rank 1 must run step 5 with rank 0, which already holds it";
  EXPECT_FALSE(behind.cancel);
  EXPECT_EQ(behind.assignment->global_step, 5);
  EXPECT_EQ(f.StopStep(0, 6), 6);
  EXPECT_EQ(f.StopStep(1, 6), 6);
  EXPECT_TRUE(f.Acquire(1, 7).cancel) << "nothing after the stop step";
  EXPECT_EQ(f.co->Get(f.job)->status.phase, JobPhase::kCancelled);
}

// Both ranks at the same step when the cancel comes: neither gets another one.
TEST(CoordinatorCancelTest, RanksInStepTogetherStopAtTheNextStep) {
  CancelFixture f;
  f.Register(0);
  f.Register(1);
  for (int64_t step = 0; step <= 2; ++step) {
    for (int r = 0; r < 2; ++r) ASSERT_TRUE(f.Acquire(r, step).assignment);
  }
  ASSERT_TRUE(f.co->Cancel(f.job, "user").ok());
  EXPECT_EQ(f.StopStep(0, 3), 3);
  EXPECT_EQ(f.StopStep(1, 3), 3);
}

TEST(CoordinatorCancelTest, RanksStillThereAfterTheCancelGraceAreToldToAbort) {
  CancelFixture f;
  f.Register(0);
  const int attempt = f.Register(1);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(f.Acquire(r, 0).assignment);
  ASSERT_TRUE(f.co->Cancel(f.job, "user").ok());
  const absl::Duration grace = JobPolicy{}.cancel_grace;
  ASSERT_GE(grace, absl::Seconds(1));
  ASSERT_LE(grace, absl::Seconds(4)) << "with the 1 s heartbeat and the 5 s abort grace: gone within 10 s";
  for (int r = 0; r < 2; ++r) {
    const HeartbeatAnswer a = f.Beat(r, attempt);
    EXPECT_TRUE(a.cancel);
    EXPECT_FALSE(a.abort) << "the ranks first get the chance to reach the stop step";
  }
  f.clock.Advance(grace - absl::Milliseconds(1));
  EXPECT_FALSE(f.Beat(0, attempt).abort);
  f.clock.Advance(absl::Milliseconds(1));
  // A step longer than the grace, or a rank stuck in a collective: abort, which ends the collective.
  for (int r = 0; r < 2; ++r) {
    const HeartbeatAnswer a = f.Beat(r, attempt);
    EXPECT_TRUE(a.cancel);
    EXPECT_TRUE(a.abort) << "rank " << r;
  }
}

// No attempt ran at the cancel: nothing was agreed, so no step is granted and any rank still heartbeating
// (one of an attempt that had already failed) aborts at once.
TEST(CoordinatorCancelTest, ACancelWithNoAttemptRunningGrantsNothingAndAbortsAtOnce) {
  CancelFixture f;
  f.Register(0);
  const int attempt = f.Register(1);
  ASSERT_TRUE(f.Acquire(0, 0).assignment);
  f.clock.Advance(JobPolicy{}.heartbeat_timeout + absl::Seconds(1));  // silent ranks: the attempt fails
  ASSERT_TRUE(f.co->Tick().ok());
  ASSERT_EQ(f.co->Get(f.job)->status.phase, JobPhase::kRestarting);
  ASSERT_TRUE(f.co->Cancel(f.job, "user").ok());
  EXPECT_EQ(f.Log().find("ranks stop before step"), std::string::npos) << f.Log();
  EXPECT_TRUE(f.Acquire(1, 0).cancel);
  const HeartbeatAnswer a = f.Beat(1, attempt);
  EXPECT_TRUE(a.cancel);
  EXPECT_TRUE(a.abort);
}

}  // namespace
}  // namespace zerofit::coordinator
