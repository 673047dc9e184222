// The coordinator's domain: jobs (store + state machines), worker registration, step assignment, reports,
// a rendezvous key-value store, and the waits that streaming RPCs block on. Thread-safe; the gRPC service
// (service.h) only translates protos to these calls. Time comes from a Clock; every wait has a deadline.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/job_state.h"
#include "coordinator/job_store.h"
#include "core/clock.h"
#include "jobspec/job_plan.h"
#include "jobspec/job_spec.h"
#include "jobspec/step_scheduler.h"
#include "planner/hardware.h"

namespace zerofit::coordinator {

struct WorkerRegistration {
  int attempt = 0;
  int64_t resume_step = 0;
  std::string spec;
  std::string request_id;  // the job's idempotency key: who a checkpoint in checkpoint.dir belongs to
  // The JobPlan (JSON) of the attempt the rank registered for: its world size and micro-batches per rank
  // (another world size than the spec's after a Slurm job shrank; attempt_plan.h).
  std::string plan;
};

// A step for the workers: its micro-batches, or stop (a preemption was requested: checkpoint the previous
// step and exit with kPreemptedExitCode), or cancel (the job is over: cancelled, failed or finished; leave
// without writing anything). Both are answered from one step on, the same for every rank (Preempt, Cancel).
struct StepGrant {
  std::shared_ptr<const jobspec::StepAssignment> assignment;  // null when stop or cancel
  bool stop = false;
  bool cancel = false;
};

// What a rank's heartbeat carries (HeartbeatRequest).
struct HeartbeatInfo {
  int rank = 0;
  int attempt = 0;       // the attempt the rank registered for (0: unknown, an older worker)
  std::string activity;  // what it is doing; at most kMaxActivityBytes are kept
};

// The answer: cancel = the job is over (the step grants say where to stop); abort = the rank's attempt has
// failed, or was cancelled and did not reach its stop step within the job's cancel_grace: abort the
// communicator now, even inside a collective, and exit (cancel is set too).
struct HeartbeatAnswer {
  bool cancel = false;
  bool abort = false;
};
inline constexpr size_t kMaxActivityBytes = 256;

struct WorkerReport {
  int rank = 0;
  int attempt = 0;  // the attempt the rank registered for (0: before registration, or an older worker)
  std::string host;
  int64_t step = -1;  // -1: no metrics in this report
  double loss = 0, accuracy = 0, tokens_per_s = 0;
  int64_t peak_bytes = 0;
  std::vector<std::pair<std::string, double>> named;  // the step's named metrics (ValidateNamedMetrics)
  std::vector<std::string> log_lines;
  int64_t checkpoint_step = -1;
  bool finished = false;
  int exit_code = 0;
  bool out_of_memory = false;
  bool after_abort = false;  // a failed exit's error followed an abort (JobStateMachine::NoteWorkerError)
};

class Coordinator {
 public:
  // Reads every job back from `store` (a restarted coordinator continues where it stopped).
  static absl::StatusOr<std::unique_ptr<Coordinator>> Create(std::unique_ptr<JobStore> store,
                                                             const core::Clock* clock, JobPolicy policy = {});

  // Jobs. A request id names one request (AIP-155): the same id with the same spec and name (however the
  // spec is formatted, jobspec::CanonicalJobSpec) answers the job it created (created = false); with another
  // spec or name it is AlreadyExists naming that job, and nothing changes. `resume_checkpoint` sets the
  // spec's checkpoint.resume (`zerofit run --resume`): the stored plan carries it, the stored spec is the
  // text as given.
  absl::StatusOr<JobStore::SubmitResult> Submit(const std::string& request_id, const std::string& name,
                                                const std::string& spec, const std::string& spec_source,
                                                bool resume_checkpoint = false);
  absl::StatusOr<JobRecord> Get(const std::string& id);
  absl::StatusOr<std::vector<JobRecord>> List();
  absl::StatusOr<std::vector<MetricRow>> Metrics(const std::string& id, int64_t after_step);
  // Cancels the job. A running attempt stops at one step boundary every rank agrees on, as after Preempt
  // (the step after the highest one any rank has acquired): steps before it are still granted, so that a
  // rank one step behind runs the step its peers already hold (and wait for in its collectives) instead of
  // leaving them there; from it on every step is refused with `cancel`. Nothing is written at the stop.
  // Ranks that still heartbeat cancel_grace after the cancel (a step that takes longer, a rank stuck) are
  // told to abort. Idempotent on a cancelled job (the stop step stays).
  absl::StatusOr<JobRecord> Cancel(const std::string& id, const std::string& reason);
  // Log lines after `after`; waits up to `wait` for new ones when there are none and the job is live.
  absl::StatusOr<std::vector<LogLine>> WaitLogs(const std::string& id, int64_t after, absl::Duration wait);
  // The job once its status differs from `known` (or after `wait`).
  absl::StatusOr<JobRecord> WaitStatus(const std::string& id, const JobStatus& known, absl::Duration wait);

  // Workers. An attempt forms at the world size its ranks register with: the spec's, or, with
  // slurm.on_node_loss: shrink, any of jobspec::AllowedWorldSizes (the micro-batches per rank re-planned to
  // keep the global batch, attempt_plan.h); others are refused. A running attempt takes only its own size
  // (ranks reconnecting to a restarted coordinator).
  absl::StatusOr<WorkerRegistration> Register(const std::string& job_id, int rank, int world_size,
                                              const std::string& host, const std::vector<int64_t>& lengths);
  // A rank's heartbeat, with its attempt and activity. A rank of an attempt that has ended (failed, hung,
  // superseded) is answered `abort`, whatever phase the job is in now; a rank of a job that is over,
  // `cancel`, and of a cancelled one, `abort` too once cancel_grace has passed since the cancel (at once when
  // no attempt was running at the cancel, or the coordinator restarted since: no stop step was agreed).
  absl::StatusOr<HeartbeatAnswer> Heartbeat(const std::string& job_id, const HeartbeatInfo& beat);
  // Rank `rank`'s micro-batches of `step`. Every rank of a step asks for the same assignment: it is computed
  // once and kept for the last few steps.
  // After Preempt, steps from the stop step on are refused with `stop`; after Cancel, from its stop step on
  // with `cancel`; once the job is otherwise over (failed, succeeded, or cancelled with no attempt running)
  // every step is refused with `cancel`.
  // `rank` (>= 0) asking is progress for the watchdog (JobStateMachine::StepStarted).
  absl::StatusOr<StepGrant> AcquireStep(const std::string& job_id, int64_t step, int rank = -1);
  absl::Status Report(const std::string& job_id, const WorkerReport& report);
  // `zerofit run`'s launcher for the attempt exited (see JobStateMachine::LauncherExited).
  // After Preempt, the launcher's exit ends the attempt as an interruption (no restart used).
  absl::Status LauncherExited(const std::string& job_id, int exit_code);
  // Asks the running attempt to stop at a step boundary every rank agrees on: the step after the highest one
  // any rank has acquired. Ranks checkpoint the step before it and exit with kPreemptedExitCode. Returns the
  // stop step. Idempotent (a second call returns the same step).
  absl::StatusOr<int64_t> Preempt(const std::string& job_id, const std::string& why);
  // The attempt ended from outside (a Slurm allocation requeued or killed before its launcher could report):
  // running -> restarting without using a restart; no-op otherwise.
  absl::Status Interrupt(const std::string& job_id, const std::string& why);
  absl::Status SetSlurmJobId(const std::string& job_id, const std::string& slurm_job_id);
  absl::Status KvPut(const std::string& job_id, const std::string& key, const std::string& value);
  absl::StatusOr<std::string> KvGet(const std::string& job_id, const std::string& key, absl::Duration wait);

  // Fails attempts whose ranks missed heartbeats or hung (JobStateMachine::Tick). The server calls it
  // periodically.
  absl::Status Tick();
  // Wakes every waiter (server shutdown).
  void Shutdown();

 private:
  struct Live {
    std::unique_ptr<JobStateMachine> state;
    jobspec::JobSpec spec;
    std::set<int> registered;  // ranks of the attempt being formed or running
    std::set<int> finished;    // ranks that completed the attempt
    std::optional<jobspec::StepScheduler> scheduler;
    std::vector<int64_t>
        lengths;  // rank 0's sample lengths (the scheduler is rebuilt from them on a re-plan)
    // The plan (jobspec::Resolve) of the attempt running or last formed, else the submit's; stored per
    // attempt. Its world size and micro-batches are what the step scheduler hands out.
    jobspec::JobPlan plan;
    planner::Hardware hw;   // the spec's `hardware:`, for re-plans
    int forming_world = 0;  // the world size of the attempt being formed (its ranks' registrations)
    std::map<int, std::string> forming_hosts;  // rank -> host, of the attempt being formed
    std::vector<std::string> last_hosts;       // distinct hosts of the last attempt that formed (stored)
    std::map<int64_t, std::shared_ptr<const jobspec::StepAssignment>> recent_steps;  // at most kRecentSteps
    int64_t max_acquired = -1;       // highest step handed out in this attempt
    std::optional<int64_t> stop_at;  // set by Preempt: the first step refused
    std::string stop_reason;
    std::optional<int64_t> cancel_at;  // set by Cancel of a running attempt: the first step refused
    // An attempt was scheduled since the launcher last exited. A launcher that exits without forming one
    // (every rank failed before registering: bad data, a missing file) used up an attempt all the same.
    bool scheduled_in_launch = false;
  };
  static constexpr size_t kRecentSteps = 4;
  // The first step no rank of the running attempt holds yet: no rank can be past max_acquired + 1 (each
  // step's collectives hold the ranks together), and every rank asks for it after finishing the one before.
  static int64_t CommonStopStep(const Live& live);
  static Live MakeLive(const jobspec::JobSpec& spec, std::unique_ptr<JobStateMachine> state,
                       jobspec::JobPlan plan, planner::Hardware hw);
  // Rebuilds the step scheduler from the job's sample lengths and micro-batch count (none without lengths).
  static absl::Status ResetScheduler(Live& live);
  Coordinator(std::unique_ptr<JobStore> store, const core::Clock* clock, JobPolicy policy)
      : store_(std::move(store)), clock_(clock), policy_(policy) {}
  absl::StatusOr<Live*> FindLocked(const std::string& id);
  // Refuses a rank whose world size the job does not allow, or that differs from the running attempt's.
  static absl::Status CheckWorld(const std::string& id, const Live& live, int rank, int world_size);
  // The last rank of an attempt registered: re-plan for its world size (and after an out-of-memory
  // failure), record what it formed with, schedule it.
  absl::Status FormAttemptLocked(const std::string& id, Live& live, int world_size);
  // The plan (JSON) an attempt of `world_size` ranks runs by.
  static std::string PlanFor(const Live& live, int world_size);
  // The stored plan of a job read back from `store`, or resolved again and stored (a job stored by an older
  // build).
  static absl::StatusOr<jobspec::JobPlan> StoredPlan(JobStore& store, const JobRecord& j,
                                                     const jobspec::JobSpec& spec,
                                                     const planner::Hardware& hw);
  absl::Status PersistLocked(const std::string& id, Live& live);  // store + notify
  absl::Status LogLocked(const std::string& id, const std::string& source, const std::string& text);
  absl::Status InterruptLocked(const std::string& id, Live& live, const std::string& why);

  std::unique_ptr<JobStore> store_;
  const core::Clock* clock_;
  JobPolicy policy_;
  std::mutex mu_;
  std::condition_variable changed_;  // any status, log or kv change
  std::map<std::string, Live> jobs_;
  std::map<std::pair<std::string, std::string>, std::string> kv_;
  bool shutdown_ = false;
};

}  // namespace zerofit::coordinator
