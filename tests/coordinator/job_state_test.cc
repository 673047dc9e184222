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
      if (i == 0) {
        ASSERT_TRUE(job.Heartbeat(1, clock.Now()).ok());
      }
      if (i < 2) {
        EXPECT_FALSE(job.Tick(clock.Now())) << "rank 1 is within its 5 s";
      }
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

// A job that never completed a step and whose workers fail before the first step (a missing data dir, a bad
// file): the same inputs would fail the same way, so it fails at once with the workers' error, whatever
// max_restarts says; both when no attempt formed (a rank failed before registering) and when one did.
TEST(JobStateTest, AFailureBeforeTheFirstStepOfAJobThatNeverTrainedFailsAtOnce) {
  core::FakeClock clock;
  JobPolicy policy;
  policy.max_restarts = 3;
  JobStateMachine unformed(policy, clock.Now());
  ASSERT_TRUE(unformed.NoteWorkerError(1, "cannot start: data dir /d/prefs: no such directory").ok());
  ASSERT_TRUE(unformed.LaunchFailed(1, clock.Now()).ok());
  EXPECT_EQ(unformed.status().phase, JobPhase::kFailed);
  EXPECT_EQ(unformed.status().restarts, 0);
  EXPECT_NE(unformed.status().reason.find("rank 1: cannot start: data dir /d/prefs: no such directory"),
            std::string::npos)
      << unformed.status().reason;
  EXPECT_NE(
      unformed.status().reason.find("before the first step of attempt 1; the job never completed a step"),
      std::string::npos)
      << unformed.status().reason;

  JobStateMachine formed(policy, clock.Now());
  ASSERT_TRUE(formed.Schedule(2, clock.Now()).ok());
  ASSERT_TRUE(formed.NoteWorkerError(0, "step 0 failed: tokenizer.json: no such file").ok());
  ASSERT_TRUE(formed.WorkerExited(0, 1, clock.Now()).ok());
  EXPECT_EQ(formed.status().phase, JobPhase::kFailed);
  EXPECT_NE(formed.status().reason.find("rank 0 exited with code 1: rank 0: step 0 failed: tokenizer.json"),
            std::string::npos)
      << formed.status().reason;
  // The launcher's exit after that changes nothing.
  ASSERT_TRUE(formed.LauncherExited(1, clock.Now()).ok());
  EXPECT_EQ(formed.status().phase, JobPhase::kFailed);
  EXPECT_EQ(formed.status().restarts, 0);
}

// The reason names the rank whose own error ended the attempt: an error that followed an abort (a peer's
// collective ended: "another rank failed") gives way to a later rank's own error, whichever arrived first;
// two ranks' own errors keep the first; an after-abort error is kept when no rank said more.
TEST(JobStateTest, TheReasonPrefersARanksOwnErrorToOneThatFollowedAnAbort) {
  core::FakeClock clock;
  JobPolicy policy;
  policy.max_restarts = 3;
  JobStateMachine job(policy, clock.Now());
  ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
  ASSERT_TRUE(job.StepCompleted(0).ok());
  ASSERT_TRUE(job.NoteWorkerError(0, "checkpoint: another rank failed", /*after_abort=*/true).ok());
  ASSERT_TRUE(job.NoteWorkerError(1, "write: No space left on device").ok());
  ASSERT_TRUE(job.NoteWorkerError(0, "a second error of its own").ok());
  ASSERT_TRUE(job.LauncherExited(1, clock.Now()).ok());
  EXPECT_EQ(job.status().reason, "the launcher exited with code 1: rank 1: write: No space left on device");

  ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
  ASSERT_TRUE(job.StepCompleted(1).ok());
  ASSERT_TRUE(job.NoteWorkerError(1, "mpi communicator was aborted", /*after_abort=*/true).ok());
  ASSERT_TRUE(job.NoteWorkerError(0, "checkpoint: another rank failed", /*after_abort=*/true).ok());
  ASSERT_TRUE(job.LauncherExited(1, clock.Now()).ok());
  EXPECT_EQ(job.status().reason, "the launcher exited with code 1: rank 1: mpi communicator was aborted");
}

// After an attempt made progress, an attempt that fails before its own first step may have met a transient
// failure: it is retried (one of max_restarts) once from that checkpoint. A second failure before the first
// step from the same checkpoint and plan fails the job at once.
TEST(JobStateTest, AFailureBeforeTheFirstStepAfterProgressIsRetriedOnceFromTheSameInputs) {
  core::FakeClock clock;
  JobPolicy policy;
  policy.max_restarts = 5;
  JobStateMachine job(policy, clock.Now());
  ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
  for (int64_t step = 0; step < 45; ++step) ASSERT_TRUE(job.StepCompleted(step).ok());
  ASSERT_TRUE(job.CheckpointWritten(39).ok());
  ASSERT_TRUE(job.WorkerExited(1, 137, clock.Now()).ok());  // killed mid-run
  EXPECT_EQ(job.status().phase, JobPhase::kRestarting);
  ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
  ASSERT_TRUE(job.LauncherExited(1, clock.Now()).ok());  // e.g. a transient start-up error
  EXPECT_EQ(job.status().phase, JobPhase::kRestarting) << job.status().reason;
  EXPECT_EQ(job.status().restarts, 2);
  ASSERT_TRUE(
      job.NoteWorkerError(0, "cannot start: checkpoint step-00000039: rank-00001.safetensors: short").ok());
  ASSERT_TRUE(job.LaunchFailed(1, clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kFailed);
  EXPECT_EQ(job.status().restarts, 2);
  EXPECT_NE(job.status().reason.find("rank 0: cannot start: checkpoint step-00000039"), std::string::npos)
      << job.status().reason;
  EXPECT_NE(job.status().reason.find("the previous attempt also failed before its first step from checkpoint "
                                     "step 39"),
            std::string::npos)
      << job.status().reason;
}

// Progress belongs to the attempt that made it: after a stepped attempt failed, the next launch that forms
// no attempt has not stepped (it is an early failure, retried once), and the one after it fails the job.
TEST(JobStateTest, ALaunchAfterAFailedAttemptHasNotSteppedYet) {
  core::FakeClock clock;
  JobStateMachine job(JobPolicy{}, clock.Now());  // max_restarts 3
  ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
  ASSERT_TRUE(job.StepCompleted(0).ok());
  ASSERT_TRUE(job.WorkerExited(1, 1, clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kRestarting);
  ASSERT_TRUE(job.LaunchFailed(1, clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kRestarting);
  EXPECT_EQ(job.status().restarts, 2);
  ASSERT_TRUE(job.LaunchFailed(1, clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kFailed);
  EXPECT_EQ(job.status().restarts, 2);
}

// Not a failure of the inputs: an OOM at step 0 is re-planned and retried; a lost node (missed heartbeats)
// and a preemption before the first step restart as before. A re-planned attempt is new inputs.
TEST(JobStateTest, OomLostNodesAndPreemptionBeforeTheFirstStepAreRetried) {
  core::FakeClock clock;
  JobPolicy policy;
  policy.max_restarts = 3;
  policy.heartbeat_timeout = absl::Seconds(5);
  JobStateMachine job(policy, clock.Now());
  ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
  ASSERT_TRUE(job.OutOfMemory(0, "CUDA out of memory", clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kRestarting);
  EXPECT_TRUE(job.status().replan);
  ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
  clock.Advance(absl::Seconds(6));
  EXPECT_TRUE(job.Tick(clock.Now()));
  EXPECT_EQ(job.status().phase, JobPhase::kRestarting);
  ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
  ASSERT_TRUE(job.Interrupt("preempted", clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kRestarting);
  EXPECT_EQ(job.status().restarts, 2);
  // The job still never completed a step: a worker failure before the first step ends it.
  ASSERT_TRUE(job.Schedule(2, clock.Now()).ok());
  ASSERT_TRUE(job.WorkerExited(1, 1, clock.Now()).ok());
  EXPECT_EQ(job.status().phase, JobPhase::kFailed);
}

// A coordinator restarted while an attempt ran cannot know whether that attempt completed steps: it assumes
// it did (a restart of the coordinator is no evidence against the inputs), and a recorded checkpoint proves
// that the job trained.
TEST(JobStateTest, ARestoredJobWithProgressIsRetriedAfterAnEarlyFailure) {
  core::FakeClock clock;
  JobStatus restored;
  restored.phase = JobPhase::kRunning;
  restored.attempt = 1;
  restored.world_size = 2;
  JobStateMachine running({}, restored, clock.Now());
  ASSERT_TRUE(running.WorkerExited(0, 1, clock.Now()).ok());
  EXPECT_EQ(running.status().phase, JobPhase::kRestarting);
  restored.phase = JobPhase::kRestarting;
  restored.checkpoint_step = 19;
  JobStateMachine restarting({}, restored, clock.Now());
  ASSERT_TRUE(restarting.LaunchFailed(1, clock.Now()).ok());
  EXPECT_EQ(restarting.status().phase, JobPhase::kRestarting);
  ASSERT_TRUE(restarting.LaunchFailed(1, clock.Now()).ok());
  EXPECT_EQ(restarting.status().phase, JobPhase::kFailed);
}

}  // namespace
}  // namespace zerofit::coordinator
