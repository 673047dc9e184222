// The progress watchdog of the job state machine (coordinator/job_state.h, "Hangs"), driven by a fake clock:
// a hung rank is detected when its silence passes max(K x median step time, floor) and not before, a slow
// rank that keeps progressing never is, all ranks hung at once are named, and the reasons name the host.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coordinator/job_state.h"
#include "core/clock.h"

namespace zerofit::coordinator {
namespace {

JobPolicy Watchdog(double factor, absl::Duration floor) {
  JobPolicy p;
  p.max_restarts = 3;
  p.heartbeat_timeout = absl::Seconds(3);
  p.watchdog.step_time_factor = factor;
  p.watchdog.floor = floor;
  return p;
}

// A running 2-rank job whose ranks registered from node-a and node-b.
struct Job {
  explicit Job(const JobPolicy& policy) : machine(policy, clock.Now()) {
    EXPECT_TRUE(machine.NoteHost(0, "node-a").ok());
    EXPECT_TRUE(machine.NoteHost(1, "node-b").ok());
    EXPECT_TRUE(machine.Schedule(2, clock.Now()).ok());
  }
  // Advances by `d` in steps of at most 1 s; every rank beats each time (heartbeat thread alive).
  void Wait(absl::Duration d, const std::string& activity = "") {
    while (d > absl::ZeroDuration()) {
      const absl::Duration dt = std::min(d, absl::Seconds(1));
      clock.Advance(dt);
      d -= dt;
      for (int r = 0; r < 2; ++r) EXPECT_TRUE(machine.Heartbeat(r, clock.Now(), activity).ok());
    }
  }
  // `ranks` each ask for steps first..last, one every `step_time`.
  void Steps(const std::vector<int>& ranks, int64_t first, int64_t last, absl::Duration step_time) {
    for (int64_t s = first; s <= last; ++s) {
      if (s > first) Wait(step_time);
      for (int r : ranks) EXPECT_TRUE(machine.StepStarted(r, s, clock.Now()).ok());
    }
  }
  core::FakeClock clock;
  JobStateMachine machine;
};

TEST(JobStateWatchdogTest, AHungRankIsDetectedJustAfterTheFloorAndTheJobRestarts) {
  Job job(Watchdog(10, absl::Seconds(5)));
  job.Steps({0, 1}, 0, 20, absl::Milliseconds(100));  // 20 step times of 100 ms: 10 x median = 1 s < floor
  EXPECT_EQ(job.machine.HangLimit(), absl::Seconds(5));
  // Rank 1 asked for step 21 and never for 22; rank 0 goes on.
  for (int64_t s = 21; s <= 70; ++s) {
    job.Wait(absl::Milliseconds(100), "step 21: all_gather #1");
    ASSERT_TRUE(job.machine.StepStarted(0, s, job.clock.Now()).ok());
    if (s == 21) {
      ASSERT_TRUE(job.machine.StepStarted(1, s, job.clock.Now()).ok());
    }
    EXPECT_FALSE(job.machine.Tick(job.clock.Now())) << "step " << s << ": 5 s not passed";
  }
  job.Wait(absl::Milliseconds(100));  // 5.0 s since rank 1's request: not more than the limit yet
  EXPECT_FALSE(job.machine.Tick(job.clock.Now()));
  job.Wait(absl::Milliseconds(100));
  ASSERT_TRUE(job.machine.Tick(job.clock.Now()));
  const JobStatus& s = job.machine.status();
  EXPECT_EQ(s.phase, JobPhase::kRestarting) << s.reason;
  EXPECT_EQ(s.restarts, 1);
  for (const char* want : {"rank 1 (host node-b) hung while its heartbeats arrived",
                           "no progress for 5.1s since it completed step 20",
                           "limit 5s = max(10 x median 100ms of the last 20 step times, floor 5s)",
                           "it was doing: step 21: all_gather #1"}) {
    EXPECT_NE(s.reason.find(want), std::string::npos) << want << "\n" << s.reason;
  }
  EXPECT_EQ(s.reason.find("rank 0"), std::string::npos) << "rank 0 progressed: " << s.reason;
}

TEST(JobStateWatchdogTest, TheLimitIsKTimesTheMedianStepTimeWhenThatIsAboveTheFloor) {
  Job job(Watchdog(4, absl::Seconds(2)));
  job.Steps({0, 1}, 0, 10, absl::Seconds(1));
  EXPECT_EQ(job.machine.HangLimit(), absl::Seconds(4));
  job.Wait(absl::Seconds(4));
  EXPECT_FALSE(job.machine.Tick(job.clock.Now())) << "4 s is the limit, not past it";
  job.Wait(absl::Milliseconds(200));
  ASSERT_TRUE(job.machine.Tick(job.clock.Now()));
  EXPECT_NE(
      job.machine.status().reason.find("limit 4s = max(4 x median 1s of the last 20 step times, floor 2s)"),
      std::string::npos)
      << job.machine.status().reason;
}

TEST(JobStateWatchdogTest, ASlowRankThatKeepsProgressingIsNeverHung) {
  Job job(Watchdog(3, absl::Seconds(5)));
  job.Steps({0, 1}, 0, 20, absl::Milliseconds(100));
  // From step 21 every step takes 4 s (40 x the median at first): slower than K x median, under the floor;
  // then the median itself grows and the limit with it.
  for (int64_t s = 21; s <= 80; ++s) {
    for (int i = 0; i < 8; ++i) {
      job.Wait(absl::Milliseconds(500), "step: compute");
      EXPECT_FALSE(job.machine.Tick(job.clock.Now())) << "step " << s << ": " << job.machine.status().reason;
    }
    ASSERT_TRUE(job.machine.StepStarted(0, s, job.clock.Now()).ok());
    ASSERT_TRUE(job.machine.StepStarted(1, s, job.clock.Now()).ok());
  }
  EXPECT_EQ(job.machine.status().phase, JobPhase::kRunning);
  EXPECT_EQ(job.machine.HangLimit(), absl::Seconds(12)) << "3 x the median step time of 4 s";
}

TEST(JobStateWatchdogTest, AStepReportIsProgressTooSoALongCheckpointBetweenRequestsIsNotAHang) {
  Job job(Watchdog(10, absl::Seconds(5)));
  job.Steps({0, 1}, 0, 5, absl::Milliseconds(100));
  // Step 5's compute, then a report, then a long evaluation + checkpoint: 4 s + 4 s, each under the floor.
  job.Wait(absl::Seconds(4));
  ASSERT_TRUE(job.machine.RankProgressed(0, job.clock.Now()).ok());
  ASSERT_TRUE(job.machine.RankProgressed(1, job.clock.Now()).ok());
  job.Wait(absl::Seconds(4));
  EXPECT_FALSE(job.machine.Tick(job.clock.Now())) << job.machine.status().reason;
}

TEST(JobStateWatchdogTest, AllRanksHungAreEachNamed) {
  Job job(Watchdog(10, absl::Seconds(5)));
  job.Steps({0, 1}, 0, 3, absl::Milliseconds(100));
  job.Wait(absl::Seconds(6), "step 3: reduce_scatter #2");
  ASSERT_TRUE(job.machine.Tick(job.clock.Now()));
  const std::string& reason = job.machine.status().reason;
  for (const char* want : {"all 2 ranks hung while their heartbeats arrived",
                           "rank 0 (host node-a): no progress", "rank 1 (host node-b): no progress",
                           "since it completed step 2", "it was doing: step 3: reduce_scatter #2"}) {
    EXPECT_NE(reason.find(want), std::string::npos) << want << "\n" << reason;
  }
}

TEST(JobStateWatchdogTest, BeforeAnyStepTheFloorAloneAppliesAndAFinishedRankWaitsWithoutBeingHung) {
  Job job(Watchdog(10, absl::Seconds(5)));
  job.Wait(absl::Seconds(5));
  EXPECT_FALSE(job.machine.Tick(job.clock.Now()));
  ASSERT_TRUE(job.machine.WorkerExited(0, 0, job.clock.Now()).ok());  // rank 0 done; rank 1 starting
  job.Wait(absl::Seconds(1));
  ASSERT_TRUE(job.machine.Tick(job.clock.Now()));
  const std::string& reason = job.machine.status().reason;
  EXPECT_NE(reason.find("rank 1 (host node-b) hung"), std::string::npos) << reason;
  EXPECT_NE(reason.find("since the attempt started"), std::string::npos) << reason;
  EXPECT_NE(reason.find("limit 5s = the floor 5s: no step time measured yet"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("rank 0"), std::string::npos) << reason;
}

TEST(JobStateWatchdogTest, ARankThatReportedTheLastStepIsNotWatchedWhileItExports) {
  Job job(Watchdog(10, absl::Seconds(5)));
  job.Steps({0, 1}, 0, 9, absl::Milliseconds(100));
  ASSERT_TRUE(
      job.machine.RankFinishing(0).ok());  // rank 0 exports for a long time, rank 1 waits at a barrier
  job.Wait(absl::Seconds(6), "finish: export");
  ASSERT_TRUE(job.machine.Tick(job.clock.Now()));
  const std::string& reason = job.machine.status().reason;
  EXPECT_NE(reason.find("rank 1 (host node-b) hung"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("rank 0"), std::string::npos) << reason;
}

TEST(JobStateWatchdogTest, AnOffWatchdogNeverFiresAndMissedHeartbeatsNameTheHost) {
  JobPolicy off = Watchdog(10, absl::Seconds(5));
  off.watchdog.enabled = false;
  Job job(off);
  job.Steps({0, 1}, 0, 3, absl::Milliseconds(100));
  job.Wait(absl::Hours(1));
  EXPECT_FALSE(job.machine.Tick(job.clock.Now()));
  // Rank 1's heartbeats stop: the lost node is named by its host.
  job.clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(job.machine.Heartbeat(0, job.clock.Now()).ok());
  job.clock.Advance(absl::Seconds(2));
  ASSERT_TRUE(job.machine.Tick(job.clock.Now()));
  EXPECT_NE(job.machine.status().reason.find("rank 1 (host node-b) missed heartbeats for 4s"),
            std::string::npos)
      << job.machine.status().reason;
}

}  // namespace
}  // namespace zerofit::coordinator
