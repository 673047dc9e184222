// One rank's life in a coordinator job, free of LibTorch: read the job's plan, build the training session,
// register (rank 0 with every training pair's length), resume from the job's checkpoint, then for every step
// acquire its micro-batches, train, evaluate when due, report named metrics and a progress line, and
// checkpoint every `checkpoint.every` steps and after the last; at the end export the model. It stops
//   - when the coordinator answers a step with `cancel` (the job was cancelled: every rank gets it for the
//     same step, Coordinator::Cancel): nothing written, exit code 0;
//   - when the coordinator answers a step with `stop` (preemption): every rank got `stop` for the same step,
//     so all checkpoint the step before it (collectively) and exit with kPreemptedExitCode;
//   - on a failed step: reported (an out-of-memory one as such, so that the coordinator re-plans), then the
//     error is returned;
//   - when the coordinator stays silent longer than `coordinator_silence_limit`: the error is returned;
//   - when the coordinator answers a heartbeat with `abort` (this attempt failed: a rank hung, a node was
//     lost; or the job was cancelled and this rank did not reach the stop step in time): the heartbeat thread
//     reports this rank's last activity, calls `abort` (the communicator's Abort(): a collective blocked
//     forever returns an error), and `exit_after_abort` if the process is still there `abort_grace` later
//     (heartbeater.h). The training thread writes no checkpoint from then on and returns Aborted at its next
//     step boundary or failed collective.
//
// Steps are 0-based (core/lr_schedule.h). The loop is driven through a TrainingSession (training_session.h)
// and a client::CoordinatorClient; zerofit_worker (worker/torch/programs/worker_main.cc) wires both, and
// tests/worker/loop/worker_loop_test.cc drives it with a fake session against an in-process coordinator.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "jobspec/job_plan.h"
#include "worker/loop/heartbeater.h"
#include "worker/loop/rank_activity.h"
#include "worker/loop/smoothed_step_time.h"
#include "worker/loop/training_session.h"
#include "worker/loop/worker_loop_options.h"
#include "worker/metrics/metrics_recorder.h"

namespace zerofit::worker {

class WorkerLoop {
 public:
  // `rendezvous` (not owned, may be null) reaches make_session through its AttemptContext.
  // `coordinator` (not owned) is the client of job `job`'s coordinator.
  WorkerLoop(WorkerLoopOptions options, const client::CoordinatorClient* coordinator, std::string job,
             comm::Rendezvous* rendezvous = nullptr);
  ~WorkerLoop();

  // The process's exit code: 0 (trained to the end, or stopped because the job was cancelled), or
  // kPreemptedExitCode after a preemption checkpoint. An error otherwise, reported to the coordinator first
  // where it still listens.
  absl::StatusOr<int> Run();

 private:
  // What one report carries besides the job, rank and host.
  struct Message {
    std::string line;                               // a log line ("" on ranks that stay quiet)
    const metrics::StepMetrics* metrics = nullptr;  // the step's named metrics
    int64_t checkpoint = -1;                        // the step whose checkpoint now exists
    bool finished = false;
    int exit_code = 0;
    bool out_of_memory = false;
    bool after_abort = false;  // with a failed exit: the error followed an abort (ReportRequest.after_abort)
  };
  absl::Status Report(const Message& m);
  // Reports `error` as this rank's failure (best effort) and returns it: whatever ends a registered rank with
  // an error of its own goes through here, so that the job's reason names it, not only the rank's stderr.
  absl::Status Fail(const std::string& what, absl::Status error, bool out_of_memory = false);
  void OnAbort();  // on the heartbeat thread
  absl::Status CheckNotAborted(const std::string& before) const;

  absl::Status Start();   // plan, session, registration, resume, sinks, heartbeats, the opening lines
  absl::Status Resume();  // loads the checkpoint the coordinator resumes from (or checks the dir is ours)
  absl::Status CheckFreshCheckpointDir();  // step 0: checkpoint.dir is ours or empty (after overwrite)
  // Step 0 with checkpoint.resume: loads checkpoint.dir's latest checkpoint, if any, and starts after it;
  // rank 0 then takes over the folders of the job that wrote it (sharding::AdoptCheckpoints).
  absl::Status ContinueFromLatestCheckpoint();
  absl::Status ReportOpening();
  // One step; sets *exit_code when the loop must end with it (cancel, preemption).
  absl::Status TrainStep(int64_t step, std::optional<int>* exit_code);
  absl::StatusOr<int> Preempted(int64_t step);
  absl::Status Checkpoint(int64_t step);
  std::string ProgressLine(int64_t step, const metrics::StepMetrics& m, int64_t checkpoint) const;
  absl::StatusOr<int> Finish();

  WorkerLoopOptions options_;
  const client::CoordinatorClient* coordinator_;
  std::string job_id_;
  comm::Rendezvous* rendezvous_;
  v1::Job job_;
  jobspec::JobPlan plan_;
  std::unique_ptr<TrainingSession> session_;
  v1::RegisterWorkerResponse registered_;
  std::unique_ptr<metrics::MetricsRecorder> recorder_;
  std::unique_ptr<RankActivity> own_activity_;  // when options_.activity is null
  RankActivity* activity_;
  std::unique_ptr<Heartbeater> heartbeat_;
  int64_t num_train_pairs_ = 0;  // known on rank 0
  int64_t first_step_ = 0;
  int64_t saved_ = -1;                // the last step whose checkpoint exists
  std::vector<std::string> retired_;  // checkpoint.overwrite: the earlier jobs' folders rank 0 removed
  std::string continued_;             // checkpoint.resume: what the job continues from, for its log
  std::optional<std::vector<metrics::NamedValue>> last_eval_;
  // From Start(): the ETA of rank 0's progress lines.
  std::optional<SmoothedStepTime> step_time_;
};

// Whether `status` from a step means the rank ran out of memory (LibTorch's CPU or CUDA allocator).
bool IsOutOfMemory(const absl::Status& status);

}  // namespace zerofit::worker
