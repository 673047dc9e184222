// The worker's heartbeat thread: tells the coordinator every `period` that this rank lives, records a stop
// request (the job was cancelled), and notices when the coordinator has been silent too long (killed, or a
// network cut): a worker must not keep training, and writing checkpoints, for a coordinator that already
// failed its attempt.
//
// Thread-safe: the loop reads the flags while the thread writes them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/loop/coordinator_link.h"

namespace zerofit::worker {

class Heartbeater {
 public:
  // Starts the thread. `silence_limit`: how long without one successful heartbeat before the coordinator
  // counts as lost (it fails an attempt whose ranks were silent for its own heartbeat timeout anyway).
  Heartbeater(CoordinatorLink* link, int rank, absl::Duration period, absl::Duration silence_limit);
  ~Heartbeater();  // stops and joins the thread: at most one heartbeat's timeout (the period)
  Heartbeater(const Heartbeater&) = delete;
  Heartbeater& operator=(const Heartbeater&) = delete;

  bool stop_requested() const { return stop_.load(); }
  // OK, or Unavailable naming the coordinator's address and how long it has not answered.
  absl::Status CoordinatorLost() const;

 private:
  void Run();

  CoordinatorLink* link_;
  const int rank_;
  const absl::Duration period_, silence_limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  absl::Time last_answer_;   // guarded by mu_
  absl::Status last_error_;  // guarded by mu_: the last failed heartbeat's error
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace zerofit::worker
