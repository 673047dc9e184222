#include "worker/loop/heartbeater.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zerofit::worker {

Heartbeater::Heartbeater(const client::CoordinatorClient* coordinator, std::string job,
                         HeartbeaterOptions options)
    : coordinator_(coordinator),
      job_(std::move(job)),
      options_(std::move(options)),
      last_answer_(absl::Now()),
      thread_([this] { Run(); }) {}

Heartbeater::~Heartbeater() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Heartbeater::Abort(std::unique_lock<std::mutex>& lock) {
  aborted_at_ = absl::Now();
  abort_.store(true);
  lock.unlock();  // on_abort reports to the coordinator: bounded by the client's own deadlines
  if (options_.on_abort) options_.on_abort();
  lock.lock();
}

void Heartbeater::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    lock.unlock();
    // One attempt, bounded by the period: a silent coordinator shows up as the time since the last answer.
    const absl::StatusOr<v1::HeartbeatResponse> answer = coordinator_->Heartbeat(
        job_, options_.rank, options_.activity->attempt(), options_.activity->Describe(), options_.period);
    lock.lock();
    if (answer.ok()) {
      last_answer_ = absl::Now();
      if (answer->abort() && !aborted_at_) Abort(lock);
    } else {
      last_error_ = answer.status();
    }
    if (aborted_at_ && !grace_expired_ && absl::Now() - *aborted_at_ >= options_.abort_grace) {
      grace_expired_ = true;
      if (options_.on_grace_expired) options_.on_grace_expired();
    }
    // After an abort the grace is checked on time, not a period late.
    absl::Duration wait = options_.period;
    if (aborted_at_ && !grace_expired_) {
      wait =
          std::min(wait, std::max(absl::ZeroDuration(), *aborted_at_ + options_.abort_grace - absl::Now()));
    }
    cv_.wait_for(lock, absl::ToChronoMilliseconds(wait), [this] { return done_; });
  }
}

absl::Status Heartbeater::CoordinatorLost() const {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Duration silent = absl::Now() - last_answer_;
  if (silent <= options_.silence_limit) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "the coordinator at ", coordinator_->connection().options().address,
      " has not answered a heartbeat for ", absl::FormatDuration(absl::Trunc(silent, absl::Seconds(1))),
      " (limit ", absl::FormatDuration(options_.silence_limit),
      "): leaving so that no rank of a failed attempt keeps training; last error: ", last_error_.message()));
}

}  // namespace zerofit::worker
