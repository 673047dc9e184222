#include "coordinator/job_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

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
  if (status_.phase == JobPhase::kRunning) StartRanks(status_.world_size, now);
  // A coordinator restart is no evidence against the inputs: a running attempt is assumed to have stepped.
  attempt_stepped_ = status_.phase == JobPhase::kRunning;
  ever_stepped_ = attempt_stepped_ || status_.checkpoint_step >= 0;
}

void JobStateMachine::StartRanks(int world_size, absl::Time now) {
  RankState fresh;
  fresh.last_heartbeat = now;  // the launch (or a coordinator restart) counts as a first heartbeat
  fresh.last_progress = now;   // and as progress: the floor covers the start
  fresh.step_started = now;
  ranks_.assign(static_cast<size_t>(world_size), fresh);
}

absl::Status JobStateMachine::CheckRank(int rank, const std::string& what) const {
  if (status_.phase != JobPhase::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " from rank ", rank, " of a job that is ", JobPhaseName(status_.phase)));
  }
  if (rank < 0 || rank >= status_.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " outside world size ", status_.world_size));
  }
  return absl::OkStatus();
}

std::string JobStateMachine::RankName(int rank) const {
  const size_t r = static_cast<size_t>(rank);
  if (rank >= 0 && r < hosts_.size() && !hosts_[r].empty())
    return absl::StrCat("rank ", rank, " (host ", hosts_[r], ")");
  return absl::StrCat("rank ", rank);
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
  StartRanks(world_size, now);
  Enter(JobPhase::kRunning, "", now);
  return absl::OkStatus();
}

absl::Status JobStateMachine::Heartbeat(int rank, absl::Time now, const std::string& activity) {
  ZF_RETURN_IF_ERROR(CheckRank(rank, "heartbeat"));
  RankState& r = ranks_[static_cast<size_t>(rank)];
  r.last_heartbeat = now;
  if (!activity.empty()) r.activity = activity;
  return absl::OkStatus();
}

absl::Status JobStateMachine::NoteHost(int rank, const std::string& host) {
  if (IsTerminal(status_.phase)) {
    return absl::FailedPreconditionError(
        absl::StrCat("host of rank ", rank, " reported for a job that is ", JobPhaseName(status_.phase)));
  }
  if (rank < 0 || rank > 1 << 20) return absl::InvalidArgumentError(absl::StrCat("rank ", rank));
  if (hosts_.size() <= static_cast<size_t>(rank)) hosts_.resize(static_cast<size_t>(rank) + 1);
  hosts_[static_cast<size_t>(rank)] = host;
  return absl::OkStatus();
}

absl::Status JobStateMachine::StepStarted(int rank, int64_t step, absl::Time now) {
  ZF_RETURN_IF_ERROR(CheckRank(rank, absl::StrCat("a request for step ", step)));
  RankState& r = ranks_[static_cast<size_t>(rank)];
  if (step <= r.last_started) return absl::OkStatus();  // a retried request: no new progress
  // Only a request for the very next step measures a step; the first request of an attempt measures the
  // start (model load, resume), which the floor covers.
  if (r.last_started >= 0 && step == r.last_started + 1) {
    step_times_.push_back(now - r.step_started);
    if (step_times_.size() > kStepTimeWindow) step_times_.pop_front();
  }
  r.last_started = step;
  r.step_started = now;
  r.last_progress = now;
  return absl::OkStatus();
}

absl::Status JobStateMachine::RankProgressed(int rank, absl::Time now) {
  ZF_RETURN_IF_ERROR(CheckRank(rank, "a step report"));
  ranks_[static_cast<size_t>(rank)].last_progress = now;
  return absl::OkStatus();
}

absl::Status JobStateMachine::RankFinishing(int rank) {
  ZF_RETURN_IF_ERROR(CheckRank(rank, "the last step's report"));
  ranks_[static_cast<size_t>(rank)].done = true;
  return absl::OkStatus();
}

std::optional<absl::Duration> JobStateMachine::MedianStepTime() const {
  if (step_times_.empty()) return std::nullopt;
  std::vector<absl::Duration> sorted(step_times_.begin(), step_times_.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted[sorted.size() / 2];  // the upper median: no averaging of durations needed
}

absl::Duration JobStateMachine::HangLimit() const {
  const WatchdogPolicy& w = policy_.watchdog;
  const std::optional<absl::Duration> median = MedianStepTime();
  if (!median) return w.floor;
  return std::max(w.floor, *median * w.step_time_factor);
}

std::string JobStateMachine::DescribeHangLimit() const {
  const WatchdogPolicy& w = policy_.watchdog;
  const std::optional<absl::Duration> median = MedianStepTime();
  if (!median)
    return absl::StrCat("the floor ", absl::FormatDuration(w.floor), ": no step time measured yet");
  return absl::StrCat("max(", w.step_time_factor, " x median ",
                      absl::FormatDuration(absl::Trunc(*median, absl::Milliseconds(1))), " of the last ",
                      step_times_.size(), " step times, floor ", absl::FormatDuration(w.floor), ")");
}

std::string JobStateMachine::HangVerdict(absl::Time now) const {
  if (!policy_.watchdog.enabled) return "";
  const absl::Duration limit = HangLimit();
  std::vector<size_t> hung;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (!ranks_[i].done && now - ranks_[i].last_progress > limit) hung.push_back(i);
  }
  if (hung.empty()) return "";
  // "no progress for 7.2s since it completed step 39; it was doing: step 40: all_gather #1 for 7.1s"
  auto silence = [&](size_t i) {
    const RankState& r = ranks_[i];
    return absl::StrCat("no progress for ",
                        absl::FormatDuration(absl::Trunc(now - r.last_progress, absl::Milliseconds(100))),
                        r.last_started >= 0 ? absl::StrCat(" since it completed step ", r.last_started - 1)
                                            : std::string(" since the attempt started"),
                        "; it was doing: ", r.activity.empty() ? std::string("(not reported)") : r.activity);
  };
  const std::string limit_text =
      absl::StrCat("limit ", absl::FormatDuration(limit), " = ", DescribeHangLimit());
  if (hung.size() == 1) {
    return absl::StrCat(RankName(static_cast<int>(hung[0])), " hung while its heartbeats arrived (",
                        limit_text, "): ", silence(hung[0]));
  }
  std::vector<std::string> each;
  for (size_t i : hung) each.push_back(absl::StrCat(RankName(static_cast<int>(i)), ": ", silence(i)));
  const std::string who = hung.size() == ranks_.size() ? absl::StrCat("all ", hung.size(), " ranks")
                                                       : absl::StrCat(hung.size(), " ranks");
  return absl::StrCat(who, " hung while their heartbeats arrived (", limit_text,
                      "): ", absl::StrJoin(each, " | "));
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

absl::Status JobStateMachine::NoteWorkerError(int rank, const std::string& text, bool after_abort) {
  if (IsTerminal(status_.phase)) {
    return absl::FailedPreconditionError(
        absl::StrCat("an error of rank ", rank, " reported for a job that is ", JobPhaseName(status_.phase)));
  }
  if (text.empty()) return absl::OkStatus();
  if (worker_error_.empty() || (worker_error_after_abort_ && !after_abort)) {
    worker_error_ = absl::StrCat("rank ", rank, ": ", text);
    worker_error_after_abort_ = after_abort;
  }
  return absl::OkStatus();
}

absl::Status JobStateMachine::WorkerExited(int rank, int exit_code, absl::Time now) {
  if (status_.phase != JobPhase::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("exit of rank ", rank, " reported for a job that is ", JobPhaseName(status_.phase)));
  }
  if (exit_code == 0 && rank >= 0 && static_cast<size_t>(rank) < ranks_.size())
    ranks_[static_cast<size_t>(rank)].done = true;
  if (exit_code != 0)
    FailAttempt(absl::StrCat(RankName(rank), " exited with code ", exit_code), Cause::kWorker, now);
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
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const absl::Duration silent = now - ranks_[r].last_heartbeat;
    if (silent > policy_.heartbeat_timeout) {
      FailAttempt(
          absl::StrCat(RankName(static_cast<int>(r)), " missed heartbeats for ", absl::FormatDuration(silent),
                       " (timeout ", absl::FormatDuration(policy_.heartbeat_timeout), ")"),
          Cause::kLostNode, now);
      return true;
    }
  }
  // Every heartbeat is fresh here: a rank without progress is hung, not lost.
  if (std::string verdict = HangVerdict(now); !verdict.empty()) {
    FailAttempt(verdict, Cause::kHung, now);
    return true;
  }
  return false;
}

}  // namespace zerofit::coordinator
