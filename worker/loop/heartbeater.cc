#include "worker/loop/heartbeater.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace zerofit::worker {

Heartbeater::Heartbeater(CoordinatorLink* link, int rank, absl::Duration period, absl::Duration silence_limit)
    : link_(link),
      rank_(rank),
      period_(period),
      silence_limit_(silence_limit),
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

void Heartbeater::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    lock.unlock();
    // One attempt, bounded by the period: a silent coordinator shows up as the time since the last answer.
    const absl::StatusOr<bool> cancel = link_->Heartbeat(rank_, period_);
    lock.lock();
    if (cancel.ok()) {
      last_answer_ = absl::Now();
      if (*cancel) stop_.store(true);
    } else {
      last_error_ = cancel.status();
    }
    cv_.wait_for(lock, absl::ToChronoMilliseconds(period_), [this] { return done_; });
  }
}

absl::Status Heartbeater::CoordinatorLost() const {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Duration silent = absl::Now() - last_answer_;
  if (silent <= silence_limit_) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "the coordinator at ", link_->connection().options().address, " has not answered a heartbeat for ",
      absl::FormatDuration(absl::Trunc(silent, absl::Seconds(1))), " (limit ",
      absl::FormatDuration(silence_limit_),
      "): leaving so that no rank of a failed attempt keeps training; last error: ", last_error_.message()));
}

}  // namespace zerofit::worker
