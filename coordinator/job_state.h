// The life of one job, as a pure state machine (no I/O, no threads; time comes in with every event):
//
//   queued --Schedule--> running --Succeed--> succeeded
//                          |  attempt fails (worker exit != 0, missed heartbeats, OOM)
//                          v
//                       restarting --Schedule--> running ...   (up to max_restarts, then failed)
//   running --Interrupt--> restarting   (preempted / the Slurm allocation ended: not a failure, no restart
//   used) any non-terminal --Cancel--> cancelled
//
// An attempt fails when a rank exits non-zero, reports an out-of-memory error (then the next attempt must be
// re-planned: smaller micro-batch, more accumulation, same global batch), misses heartbeats for longer
// than heartbeat_timeout (checked by Tick), or hangs (below). A restart resumes from the last checkpoint the
// job recorded.
//
// Hangs (the progress watchdog, checked by Tick after the heartbeats). A rank makes progress when it asks
// for a step (StepStarted: it completed the one before, or finished resuming) or reports a step
// (RankProgressed: after the step's evaluation and checkpoint). The time between a rank's consecutive step
// requests is a step time; the median of the last kStepTimeWindow of them (any rank, kept across attempts:
// the same job steps at the same pace) predicts the next. A rank whose heartbeats arrive but that made no
// progress for
//   limit = max(step_time_factor x median step time, floor)     (just the floor before any step time)
// is hung: its heartbeat thread lives, its training thread does not move (a collective that never returns,
// a deadlock, a stuck file system). The attempt fails with Cause kHung: a restart like any failure (from the
// last checkpoint; not an early failure: the code worked before it stopped). The reason names every hung
// rank, its host, its last completed step, how long it has been silent, the limit and how it was computed,
// and what the rank said it was doing in its last heartbeat (its activity). A rank that reported the last
// step (RankFinishing: it exports the model and waits at a barrier with its own deadline) or exited 0 is
// not watched. The floor covers what no step time predicts: the first step's
// warm-up, an evaluation, a checkpoint write.
//
// Failures before the first step. An attempt fails early when it ends with a worker failure (a rank exits
// non-zero, the launcher exits before every rank finished, or a launch forms no attempt because a rank
// failed before registering) before any step of that attempt completed. Not early failures: an
// out-of-memory error (re-planned and retried as any OOM), missed heartbeats (a lost node) and an
// interruption (preemption). The inputs of an attempt are the checkpoint it starts from and the number of
// OOM re-plans so far. An early failure is retried (using one of max_restarts) only when
//   (a) some earlier attempt of the job completed a step (the code, data and spec are known to work), and
//   (b) no earlier early failure had the same inputs (a transient failure gets one retry from a checkpoint).
// Otherwise the job fails at once, whatever max_restarts says: the same inputs would fail the same way (a
// missing data dir is not fixed by relaunching). The reason then carries the workers' error
// (NoteWorkerError).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "jobspec/exit_codes.h"

namespace zerofit::coordinator {

using jobspec::kPreemptedExitCode;  // jobspec/exit_codes.h: shared with workers and launchers

enum class JobPhase { kQueued, kRunning, kRestarting, kSucceeded, kFailed, kCancelled };
const char* JobPhaseName(JobPhase p);
bool IsTerminal(JobPhase p);

// The progress watchdog (the header comment; the job spec's `watchdog:` section, jobspec/job_spec.h).
struct WatchdogPolicy {
  bool enabled = true;
  double step_time_factor = 10;
  absl::Duration floor = absl::Seconds(300);
};

struct JobPolicy {
  int max_restarts = 3;
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  WatchdogPolicy watchdog;
  // After a cancel, how long the running attempt's ranks have to reach the common stop step before their
  // heartbeats are answered `abort` (Coordinator::Cancel). With the workers' 1 s heartbeat and 5 s abort
  // grace (worker/loop/heartbeater.h) every rank is gone within 10 s of the cancel even if it is stuck.
  absl::Duration cancel_grace = absl::Seconds(3);
};

struct JobStatus {
  JobPhase phase = JobPhase::kQueued;
  int attempt = 0;        // 1 for the first run; grows with every Schedule
  int restarts = 0;       // attempts that failed and were retried
  int interruptions = 0;  // attempts stopped from outside (preemption, requeue), resumed without a restart
  int world_size = 0;
  int64_t checkpoint_step = -1;  // last complete checkpoint (-1: none; a restart starts from scratch)
  bool replan = false;           // the last failure was an OOM: re-plan before the next attempt
  std::string reason;            // why the job is in its phase (failures, cancel)
  absl::Time since;              // when it entered the phase
};

class JobStateMachine {
 public:
  JobStateMachine(const JobPolicy& policy, absl::Time now);
  // A job read back from the store (after a coordinator restart). A running job's ranks get a fresh
  // heartbeat deadline from `now`: they have until then to reconnect.
  JobStateMachine(const JobPolicy& policy, const JobStatus& restored, absl::Time now);

  // Every event returns FailedPrecondition if it does not apply to the current phase (the status is
  // unchanged).
  absl::Status Schedule(int world_size, absl::Time now);  // queued | restarting -> running (a new attempt)
  // `activity`: what the rank says it is doing (kept for the watchdog's verdict; empty keeps the last one).
  absl::Status Heartbeat(int rank, absl::Time now, const std::string& activity = "");
  // The host rank `rank` registered from, named in failure reasons. Any non-terminal phase; kept across
  // attempts until the rank registers again.
  absl::Status NoteHost(int rank, const std::string& host);
  // Rank `rank` asked for `step` (running only): it completed step - 1, or finished resuming. Progress.
  absl::Status StepStarted(int rank, int64_t step, absl::Time now);
  // Rank `rank` reported a step's metrics (running only): progress.
  absl::Status RankProgressed(int rank, absl::Time now);
  // Rank `rank` reported the job's last step (running only): it exports and waits for the others at a
  // barrier bounded by its own deadline (worker_loop.h), however long an export takes: the watchdog stops
  // watching it.
  absl::Status RankFinishing(int rank);
  absl::Status WorkerExited(int rank, int exit_code, absl::Time now);  // 0 alone does not end the job
  absl::Status OutOfMemory(int rank, const std::string& what, absl::Time now);
  // The launcher of the attempt (mpiexec, srun) exited: non-zero, or zero while the job is still running,
  // fails the attempt.
  absl::Status LauncherExited(int exit_code, absl::Time now);
  // A launch that formed no attempt (queued or restarting: its ranks failed before all registered): one of
  // max_restarts used, or failed when none is left.
  absl::Status LaunchFailed(int exit_code, absl::Time now);
  absl::Status CheckpointWritten(int64_t step);  // a newer step while running: the attempt made progress
  // A rank reported that `step` completed (running only): the attempt made progress.
  absl::Status StepCompleted(int64_t step);
  // A rank's error text, reported as it failed; the first one of an attempt (or of a launch that formed no
  // attempt) goes into the reason when that attempt fails. An error `after_abort` (the rank failed because a
  // peer failed or the attempt was ended: "another rank failed") gives way to a later rank's own error, which
  // says why. Any phase but a terminal one.
  absl::Status NoteWorkerError(int rank, const std::string& text, bool after_abort = false);
  // The attempt was stopped from outside (Slurm preemption or time limit, the allocation requeued): running
  // -> restarting without using one of max_restarts. No-op in any other phase.
  absl::Status Interrupt(const std::string& why, absl::Time now);
  absl::Status Succeed(absl::Time now);
  absl::Status Cancel(const std::string& why, absl::Time now);  // idempotent on a cancelled job
  // Fails the attempt if any rank's last heartbeat is older than heartbeat_timeout, or if a rank hung (the
  // header comment). Returns true if it did.
  bool Tick(absl::Time now);

  const JobStatus& status() const { return status_; }
  const JobPolicy& policy() const { return policy_; }
  // The watchdog's current limit, and how it was computed ("max(10 x median 120ms of the last 20 step
  // times, floor 5s)").
  absl::Duration HangLimit() const;
  std::string DescribeHangLimit() const;

  static constexpr size_t kStepTimeWindow = 20;

 private:
  enum class Cause { kWorker, kOutOfMemory, kLostNode, kHung };
  // One rank of the running attempt.
  struct RankState {
    absl::Time last_heartbeat;
    absl::Time last_progress;
    absl::Time step_started;    // when it asked for last_started
    int64_t last_started = -1;  // the last step it asked for in this attempt (-1: none yet)
    bool done = false;          // finishing (RankFinishing) or exited 0: not watched
    std::string activity;       // from its last heartbeat that carried one
  };
  using Inputs = std::pair<int64_t, int>;  // (checkpoint step started from, OOM re-plans so far)

  void FailAttempt(const std::string& why, Cause cause, absl::Time now);
  // The reason when an early failure ends the job (see the header comment); empty when it is retried.
  std::string EarlyFailureVerdict();
  void Enter(JobPhase p, std::string reason, absl::Time now);
  void StartRanks(int world_size, absl::Time now);
  absl::Status CheckRank(int rank, const std::string& what) const;  // running, rank in range
  std::string RankName(int rank) const;  // "rank 1 (host node-a)", or "rank 1" without a known host
  std::optional<absl::Duration> MedianStepTime() const;
  // The reason when some rank hung at `now`; empty when none did.
  std::string HangVerdict(absl::Time now) const;

  JobPolicy policy_;
  JobStatus status_;
  std::vector<RankState> ranks_;           // this attempt's, by rank
  std::vector<std::string> hosts_;         // by rank, from registration
  std::deque<absl::Duration> step_times_;  // the kStepTimeWindow most recent, any rank, any attempt
  // Kept in memory only (a coordinator restart starts them from what the status proves: a running attempt
  // or a recorded checkpoint counts as progress).
  bool attempt_stepped_ = false;  // a step of the current attempt completed
  bool ever_stepped_ = false;     // a step of any attempt completed
  int replans_ = 0;               // OOM re-plans so far
  std::optional<Inputs> last_early_failure_;
  std::string worker_error_;               // "rank R: text" of the current attempt's first worker error
  bool worker_error_after_abort_ = false;  // worker_error_ followed an abort: a rank's own error replaces it
};

}  // namespace zerofit::coordinator
