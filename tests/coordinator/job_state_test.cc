// The job state machine driven by a fake clock.
#include "coordinator/job_state.h"

#include <gtest/gtest.h>

#include "core/clock.h"

namespace zerofit::coordinator {
namespace {

TEST(JobStateTest, HappyPathAndCheckpoints) {
  core::FakeClock clock;
  JobStateMachine job(JobPolicy{}, clock.Now());
  EXPECT_EQ(job.status().phase, JobPhase::kQueued);
  ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kRunning);
  EXPECT_EQ(job.status().attempt, 1);
  EXPECT_TRUE(job.CheckpointWritten(10).ok());
  EXPECT_FALSE(job.CheckpointWritten(5).ok()) << "checkpoints only move forward";
  EXPECT_TRUE(job.WorkerExited(0, 0, clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kRunning) << "a clean exit of one rank does not end the job";
  ASSERT_TRUE(job.Succeed(clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kSucceeded);
  EXPECT_EQ(job.status().checkpoint_step, 10);
  // Terminal: nothing applies any more, and the status does not change.
  EXPECT_EQ(job.Schedule(2, clock.Now()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(job.Cancel("late", clock.Now()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(job.status().phase, JobPhase::kSucceeded);
}

TEST(JobStateTest, MissedHeartbeatsFailTheAttemptAndTheJobRestartsUpToMaxRestarts) {
  core::FakeClock clock;
  JobPolicy policy;
  policy.max_restarts = 2;
  policy.heartbeat_timeout = absl::Seconds(5);
  JobStateMachine job(policy, clock.Now());
  for (int attempt = 1; attempt <= 3; ++attempt) {
    ASSERT_TRUE(job.Schedule(2, clock.Now()).ok()) << attempt;
    EXPECT_EQ(job.status().attempt, attempt);
    // Both ranks beat for a while; then rank 1 goes silent.
    for (int i = 0; i < 3; ++i) {
      clock.Advance(absl::Seconds(4));
      ASSERT_TRUE(job.Heartbeat(0, clock.Now()).ok());
      if (i == 0) ASSERT_TRUE(job.Heartbeat(1, clock.Now()).ok());
      if (i < 2) EXPECT_FALSE(job.Tick(clock.Now())) << "rank 1 is within its 5 s";
    }
    EXPECT_TRUE(job.Tick(clock.Now()));
    EXPECT_NE(job.status().reason.find("rank 1 missed heartbeats"), std::string::npos) << job.status().reason;
  }
  EXPECT_EQ(job.status().phase, JobPhase::kFailed);
  EXPECT_EQ(job.status().restarts, 2);
  EXPECT_NE(job.status().reason.find("2 restarts used"), std::string::npos);
}

TEST(JobStateTest, NonZeroExitAndOomRestartFromTheCheckpointOomAsksForAReplan) {
  core::FakeClock clock;
  JobStateMachine job(JobPolicy{}, clock.Now());
  ASSERT_TRUE(job.Schedule(4, clock.Now()).ok());
  ASSERT_TRUE(job.CheckpointWritten(30).ok());
  ASSERT_TRUE(job.WorkerExited(3, 137, clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kRestarting);
  EXPECT_FALSE(job.status().replan);
  EXPECT_EQ(job.status().checkpoint_step, 30);
  EXPECT_NE(job.status().reason.find("rank 3 exited with code 137"), std::string::npos);
  ASSERT_TRUE(job.Schedule(4, clock.Now()).ok());
  ASSERT_TRUE(job.OutOfMemory(1, "CUDA out of memory (tried 2.1 GB)", clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kRestarting);
  EXPECT_TRUE(job.status().replan);
  ASSERT_TRUE(job.Schedule(4, clock.Now()).ok());
  EXPECT_FALSE(job.status().replan) << "cleared by the new attempt";
  EXPECT_EQ(job.Heartbeat(4, clock.Now()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobStateTest, CancelFromAnyLivePhaseIsIdempotent) {
  core::FakeClock clock;
  JobStateMachine queued(JobPolicy{}, clock.Now());
  ASSERT_TRUE(queued.Cancel("user", clock.Now()).ok());
  EXPECT_EQ(queued.status().phase, JobPhase::kCancelled);
  EXPECT_TRUE(queued.Cancel("again", clock.Now()).ok());
  EXPECT_EQ(queued.status().reason, "user");
  JobStateMachine running(JobPolicy{}, clock.Now());
  ASSERT_TRUE(running.Schedule(1, clock.Now()).ok());
  clock.Advance(absl::Minutes(1));
  ASSERT_TRUE(running.Cancel("user", clock.Now()).ok());
  EXPECT_EQ(running.status().since, clock.Now());
  EXPECT_FALSE(running.Tick(clock.Now() + absl::Hours(1))) << "a cancelled job has no heartbeats to miss";
}

TEST(JobStateTest, AnInterruptionRestartsWithoutUsingARestart) {
  core::FakeClock clock;
  JobPolicy policy;
  policy.max_restarts = 0;  // any failure would end the job
  JobStateMachine job(policy, clock.Now());
  EXPECT_TRUE(job.Interrupt("too early", clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kQueued) << "only a running attempt is interrupted";
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
    ASSERT_TRUE(job.CheckpointWritten(10 * i).ok());
    ASSERT_TRUE(job.Interrupt("preempted", clock.Now()).ok());
    EXPECT_EQ(job.status().phase, JobPhase::kRestarting);
    EXPECT_EQ(job.status().interruptions, i);
    EXPECT_EQ(job.status().restarts, 0);
    EXPECT_EQ(job.status().reason, "preempted");
  }
  ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
  EXPECT_EQ(job.status().attempt, 4);
  EXPECT_EQ(job.status().checkpoint_step, 30);
  ASSERT_TRUE(job.Succeed(clock.Now()).ok());
  EXPECT_TRUE(job.Interrupt("late", clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kSucceeded);
}

}  // namespace
}  // namespace zerofit::coordinator
