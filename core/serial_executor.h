// One background thread running submitted jobs in FIFO order: the "copy engine" of the CPU-only offload path
// (device<->host copies and the collectives that follow them) and the delayed-update thread. RAII: the
// destructor lets queued jobs finish and joins; jobs are bounded local work, so it cannot hang on a peer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace zerofit::core {

class SerialExecutor {
 public:
  SerialExecutor();
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  // Jobs must not throw; a job's failure is its own business (capture a Status). Returns the job's ticket:
  // 1 for the first job submitted, 2 for the next, ...
  uint64_t Submit(std::function<void()> job);
  // Waits until every submitted job has run; DeadlineExceeded after `timeout`.
  absl::Status Drain(absl::Duration timeout);
  // Waits until the job with `ticket` (and so every job before it) has run; DeadlineExceeded after `timeout`.
  absl::Status WaitFor(uint64_t ticket, absl::Duration timeout);
  bool Idle();

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool running_job_ = false;                 // guarded by mu_
  uint64_t submitted_ = 0;                   // guarded by mu_
  uint64_t finished_ = 0;                    // guarded by mu_
  bool stop_ = false;                        // guarded by mu_
  std::thread thread_;
};

}  // namespace zerofit::core
