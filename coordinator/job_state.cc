#include "coordinator/job_state.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace zerofit::coordinator {

const char* JobPhaseName(JobPhase p) {
  switch (p) {
    case JobPhase::kQueued:
      return "queued";
    case JobPhase::kRunning:
      return "running";
    case JobPhase::kRestarting:
      return "restarting";
    case JobPhase::kSucceeded:
      return "succeeded";
    case JobPhase::kFailed:
      return "failed";
    case JobPhase::kCancelled:
      return "cancelled";
  }
  return "?";
}

bool IsTerminal(JobPhase p) {
  return p == JobPhase::kSucceeded || p == JobPhase::kFailed || p == JobPhase::kCancelled;
}

JobStateMachine::JobStateMachine(const JobPolicy& policy, absl::Time now) : policy_(policy) {
  status_.since = now;
}

JobStateMachine::JobStateMachine(const JobPolicy& policy, const JobStatus& restored, absl::Time now)
    : policy_(policy), status_(restored) {
  if (status_.phase == JobPhase::kRunning)
    last_heartbeat_.assign(static_cast<size_t>(status_.world_size), now);
}

void JobStateMachine::Enter(JobPhase p, std::string reason, absl::Time now) {
  status_.phase = p;
  status_.reason = std::move(reason);
  status_.since = now;
}

absl::Status JobStateMachine::Schedule(int world_size, absl::Time now) {
  if (status_.phase != JobPhase::kQueued && status_.phase != JobPhase::kRestarting) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot schedule a job that is ", JobPhaseName(status_.phase)));
  }
  if (world_size < 1) return absl::InvalidArgumentError("world_size must be >= 1");
  ++status_.attempt;
  status_.world_size = world_size;
  status_.replan = false;
  last_heartbeat_.assign(static_cast<size_t>(world_size), now);  // the launch counts as a first heartbeat
  Enter(JobPhase::kRunning, "", now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::Heartbeat(int rank, absl::Time now) {
  if (status_.phase != JobPhase::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("heartbeat from rank ", rank, " of a job that is ", JobPhaseName(status_.phase)));
  }
  if (rank < 0 || rank >= status_.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " outside world size ", status_.world_size));
  }
  last_heartbeat_[static_cast<size_t>(rank)] = now;
  return absl::OkStatus();
}

void JobStateMachine::FailAttempt(const std::string& why, bool oom, absl::Time now) {
  if (status_.restarts < policy_.max_restarts) {
    ++status_.restarts;
    status_.replan = oom;
    Enter(JobPhase::kRestarting, why, now);
  } else {
    Enter(JobPhase::kFailed, absl::StrCat(why, " (", policy_.max_restarts, " restarts used)"), now);
  }
}

absl::Status JobStateMachine::WorkerExited(int rank, int exit_code, absl::Time now) {
  if (status_.phase != JobPhase::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("exit of rank ", rank, " reported for a job that is ", JobPhaseName(status_.phase)));
  }
  if (exit_code != 0) FailAttempt(absl::StrCat("rank ", rank, " exited with code ", exit_code), false, now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::OutOfMemory(int rank, const std::string& what, absl::Time now) {
  if (status_.phase != JobPhase::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat(
        "out-of-memory on rank ", rank, " reported for a job that is ", JobPhaseName(status_.phase)));
  }
  FailAttempt(absl::StrCat("rank ", rank, " ran out of memory: ", what), true, now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::LauncherExited(int exit_code, absl::Time now) {
  if (status_.phase != JobPhase::kRunning) return absl::OkStatus();  // the job already ended or failed over
  FailAttempt(exit_code != 0 ? absl::StrCat("the launcher exited with code ", exit_code)
                             : "the launcher exited before every rank finished",
              false, now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::LaunchFailed(int exit_code, absl::Time now) {
  if (status_.phase != JobPhase::kQueued && status_.phase != JobPhase::kRestarting) {
    return absl::FailedPreconditionError(
        absl::StrCat("a failed launch reported for a job that is ", JobPhaseName(status_.phase)));
  }
  FailAttempt(absl::StrCat("the launcher exited with code ", exit_code,
                           " before every rank registered (see the ranks' log lines above)"),
              false, now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::Interrupt(const std::string& why, absl::Time now) {
  if (status_.phase != JobPhase::kRunning) return absl::OkStatus();
  ++status_.interruptions;
  status_.replan = false;
  Enter(JobPhase::kRestarting, why, now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::CheckpointWritten(int64_t step) {
  if (IsTerminal(status_.phase)) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint reported for a job that is ", JobPhaseName(status_.phase)));
  }
  if (step < status_.checkpoint_step) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint step ", step, " is older than the recorded ", status_.checkpoint_step));
  }
  status_.checkpoint_step = step;
  return absl::OkStatus();
}

absl::Status JobStateMachine::Succeed(absl::Time now) {
  if (status_.phase != JobPhase::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("a job that is ", JobPhaseName(status_.phase), " cannot succeed"));
  }
  Enter(JobPhase::kSucceeded, "", now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::Cancel(const std::string& why, absl::Time now) {
  if (status_.phase == JobPhase::kCancelled) return absl::OkStatus();
  if (IsTerminal(status_.phase)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot cancel a job that already ", JobPhaseName(status_.phase)));
  }
  Enter(JobPhase::kCancelled, why, now);
  return absl::OkStatus();
}

bool JobStateMachine::Tick(absl::Time now) {
  if (status_.phase != JobPhase::kRunning) return false;
  for (size_t r = 0; r < last_heartbeat_.size(); ++r) {
    if (now - last_heartbeat_[r] > policy_.heartbeat_timeout) {
      FailAttempt(
          absl::StrCat("rank ", r, " missed heartbeats for ", absl::FormatDuration(now - last_heartbeat_[r]),
                       " (timeout ", absl::FormatDuration(policy_.heartbeat_timeout), ")"),
          false, now);
      return true;
    }
  }
  return false;
}

}  // namespace zerofit::coordinator
