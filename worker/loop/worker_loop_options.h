// How the program around a rank configures its worker loop (worker_loop.h, run_worker.h). Free of generated
// protobuf types on purpose: zerofit_worker's main sees LibTorch, and pip's torch ships an old copy of
// google/protobuf/ in its include folder that shadows the one the generated code needs (issue 28;
// tests/tools/check_torch_pb_separation.py fails the build's tests if a LibTorch file reaches a *.pb.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "comm/rendezvous.h"
#include "jobspec/job_plan.h"
#include "worker/loop/rank_activity.h"
#include "worker/loop/training_session.h"

namespace zerofit::worker {

// What a session needs to know of the coordinator's attempt it is built for.
struct AttemptContext {
  std::string job;  // the job id
  int attempt = 0;  // the coordinator's attempt number: rendezvous keys are scoped to it
  // The coordinator's key-value store for this job (Workers.KvPut/KvGet), for exchanging e.g. NCCL's unique
  // id; valid while the loop runs. Null where the loop was given none (tests).
  comm::Rendezvous* rendezvous = nullptr;
};

struct WorkerLoopOptions {
  int rank = 0;
  int world_size = 1;
  std::string hostname;     // reported with every message
  std::string launched_as;  // how the launcher started this rank, for the "started:" line
  absl::Duration heartbeat_period = absl::Seconds(1);
  absl::Duration coordinator_silence_limit = absl::Seconds(30);
  absl::Duration barrier_timeout = absl::Minutes(5);
  // A barrier of the job's ranks (the host communicator's), bounded by its argument.
  std::function<absl::Status(absl::Duration)> barrier;
  // What the rank is doing, shared with the communicator decorator that notes collectives
  // (comm/hooked_communicator.h); not owned. Null: the loop keeps its own (no collectives noted).
  RankActivity* activity = nullptr;
  // Aborts the rank's communicators (never blocks); called from the heartbeat thread. Empty: none.
  std::function<void()> abort;
  absl::Duration abort_grace = absl::Seconds(5);
  // Called from the heartbeat thread when the process is still alive abort_grace after an abort
  // (zerofit_worker: _exit(kAbortedExitCode)). Empty: nothing.
  std::function<void()> exit_after_abort;
  // Builds this rank's session for the plan (model, data, optimizer). Collective.
  std::function<absl::StatusOr<std::unique_ptr<TrainingSession>>(const jobspec::JobPlan&,
                                                                 const AttemptContext& attempt)>
      make_session;
};

}  // namespace zerofit::worker
