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
  // A coordinator restart is no evidence against the inputs: a running attempt is assumed to have stepped.
  attempt_stepped_ = status_.phase == JobPhase::kRunning;
  ever_stepped_ = attempt_stepped_ || status_.checkpoint_step >= 0;
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
  attempt_stepped_ = false;
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

std::string JobStateMachine::EarlyFailureVerdict() {
  const Inputs inputs{status_.checkpoint_step, replans_};
  // A launch that formed no attempt was to be the next one.
  const int attempt = status_.phase == JobPhase::kRunning ? status_.attempt : status_.attempt + 1;
  const std::string from = status_.checkpoint_step >= 0
                               ? absl::StrCat("checkpoint step ", status_.checkpoint_step)
                               : std::string("the start");
  if (!ever_stepped_) {
    return absl::StrCat("before the first step of attempt ", attempt,
                        "; the job never completed a step, and the same inputs would fail the same way, so "
                        "it is not retried (max_restarts not used)");
  }
  if (last_early_failure_ == inputs) {
    return absl::StrCat("before the first step of attempt ", attempt,
                        "; the previous attempt also failed before its first step from ", from,
                        ", so it is not retried again (max_restarts not used)");
  }
  last_early_failure_ = inputs;
  return "";
}

void JobStateMachine::FailAttempt(const std::string& why, Cause cause, absl::Time now) {
  const std::string what = worker_error_.empty() ? why : absl::StrCat(why, ": ", worker_error_);
  worker_error_.clear();
  const bool stepped = attempt_stepped_;
  attempt_stepped_ = false;  // the next launch has not stepped, whether or not it forms an attempt
  if (cause == Cause::kWorker && !stepped) {
    if (std::string verdict = EarlyFailureVerdict(); !verdict.empty()) {
      Enter(JobPhase::kFailed, absl::StrCat(what, " (", verdict, ")"), now);
      return;
    }
  }
  if (status_.restarts < policy_.max_restarts) {
    ++status_.restarts;
    status_.replan = cause == Cause::kOutOfMemory;
    if (status_.replan) ++replans_;
    Enter(JobPhase::kRestarting, what, now);
  } else {
    Enter(JobPhase::kFailed, absl::StrCat(what, " (", policy_.max_restarts, " restarts used)"), now);
  }
}

absl::Status JobStateMachine::StepCompleted(int64_t step) {
  if (status_.phase != JobPhase::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", step, " reported for a job that is ", JobPhaseName(status_.phase)));
  }
  attempt_stepped_ = true;
  ever_stepped_ = true;
  return absl::OkStatus();
}

absl::Status JobStateMachine::NoteWorkerError(int rank, const std::string& text) {
  if (IsTerminal(status_.phase)) {
    return absl::FailedPreconditionError(
        absl::StrCat("an error of rank ", rank, " reported for a job that is ", JobPhaseName(status_.phase)));
  }
  if (worker_error_.empty() && !text.empty()) worker_error_ = absl::StrCat("rank ", rank, ": ", text);
  return absl::OkStatus();
}

absl::Status JobStateMachine::WorkerExited(int rank, int exit_code, absl::Time now) {
  if (status_.phase != JobPhase::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("exit of rank ", rank, " reported for a job that is ", JobPhaseName(status_.phase)));
  }
  if (exit_code != 0)
    FailAttempt(absl::StrCat("rank ", rank, " exited with code ", exit_code), Cause::kWorker, now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::OutOfMemory(int rank, const std::string& what, absl::Time now) {
  if (status_.phase != JobPhase::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat(
        "out-of-memory on rank ", rank, " reported for a job that is ", JobPhaseName(status_.phase)));
  }
  FailAttempt(absl::StrCat("rank ", rank, " ran out of memory: ", what), Cause::kOutOfMemory, now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::LauncherExited(int exit_code, absl::Time now) {
  if (status_.phase != JobPhase::kRunning) return absl::OkStatus();  // the job already ended or failed over
  FailAttempt(exit_code != 0 ? absl::StrCat("the launcher exited with code ", exit_code)
                             : "the launcher exited before every rank finished",
              Cause::kWorker, now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::LaunchFailed(int exit_code, absl::Time now) {
  if (status_.phase != JobPhase::kQueued && status_.phase != JobPhase::kRestarting) {
    return absl::FailedPreconditionError(
        absl::StrCat("a failed launch reported for a job that is ", JobPhaseName(status_.phase)));
  }
  FailAttempt(absl::StrCat("the launcher exited with code ", exit_code,
                           " before every rank registered (see the ranks' log lines above)"),
              Cause::kWorker, now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::Interrupt(const std::string& why, absl::Time now) {
  if (status_.phase != JobPhase::kRunning) return absl::OkStatus();
  ++status_.interruptions;
  status_.replan = false;
  worker_error_.clear();
  attempt_stepped_ = false;
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
  if (status_.phase == JobPhase::kRunning && step > status_.checkpoint_step) {
    attempt_stepped_ = true;
    ever_stepped_ = true;
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
          Cause::kLostNode, now);
      return true;
    }
  }
  return false;
}

}  // namespace zerofit::coordinator
