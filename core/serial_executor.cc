#include "core/serial_executor.h"

#include "absl/strings/str_cat.h"

namespace zerofit::core {

SerialExecutor::SerialExecutor() : thread_([this] { Loop(); }) {}

SerialExecutor::~SerialExecutor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t SerialExecutor::Submit(std::function<void()> job) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    ticket = ++submitted_;
  }
  cv_.notify_all();
  return ticket;
}

bool SerialExecutor::Idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.empty() && !running_job_;
}

absl::Status SerialExecutor::Drain(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!idle_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                         [&] { return queue_.empty() && !running_job_; })) {
    return absl::DeadlineExceededError(
        absl::StrCat("background jobs did not finish within ", absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

absl::Status SerialExecutor::WaitFor(uint64_t ticket, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!idle_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return finished_ >= ticket; })) {
    return absl::DeadlineExceededError(absl::StrCat("background job ", ticket, " did not finish within ",
                                                    absl::FormatDuration(timeout), " (", finished_, " of ",
                                                    submitted_, " done)"));
  }
  return absl::OkStatus();
}

void SerialExecutor::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop requested, nothing left
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    running_job_ = true;
    lock.unlock();
    job();
    lock.lock();
    running_job_ = false;
    ++finished_;
    idle_cv_.notify_all();  // Drain waits for an empty queue, WaitFor for a ticket
  }
}

}  // namespace zerofit::core
