// The worker's heartbeat thread: tells the coordinator every `period` that this rank lives (with its attempt
// and what it is doing, rank_activity.h), and notices when the coordinator has been silent too long (killed,
// or a network cut): a worker must not keep training, and writing checkpoints, for a coordinator that already
// failed its attempt. A `cancel` answer alone changes nothing here: the step grants say where a cancelled
// job's ranks stop, the same step for all (Coordinator::Cancel).
//
// Abort. When the coordinator answers `abort` (this rank's attempt failed: a rank hung, a node was lost,
// another rank failed; or its job was cancelled and the rank did not reach the stop step within the
// coordinator's cancel grace), the training thread may be blocked inside a collective that will never return,
// so this thread acts: it calls `on_abort` once (the loop reports its last activity, then aborts the
// communicator, which makes the blocked collective fail), and if the process is still alive `abort_grace`
// later it calls `on_grace_expired` (zerofit_worker: _exit with kAbortedExitCode).
//
// Thread-safe: the loop reads the flags while the thread writes them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "worker/loop/rank_activity.h"

namespace zerofit::worker {

struct HeartbeaterOptions {
  int rank = 0;
  absl::Duration period = absl::Seconds(1);
  // How long without one successful heartbeat before the coordinator counts as lost (it fails an attempt
  // whose ranks were silent for its own heartbeat timeout anyway).
  absl::Duration silence_limit = absl::Seconds(30);
  absl::Duration abort_grace = absl::Seconds(5);
  const RankActivity* activity = nullptr;  // required; outlives the Heartbeater
  std::function<void()> on_abort;          // on this thread, once; may be empty
  std::function<void()> on_grace_expired;  // on this thread, once; may be empty
};

class Heartbeater {
 public:
  // Starts the thread.
  // `coordinator` (not owned, outlives the Heartbeater) is the client of job `job`'s coordinator.
  Heartbeater(const client::CoordinatorClient* coordinator, std::string job, HeartbeaterOptions options);
  ~Heartbeater();  // stops and joins the thread: at most one heartbeat's timeout (the period)
  Heartbeater(const Heartbeater&) = delete;
  Heartbeater& operator=(const Heartbeater&) = delete;

  bool abort_requested() const { return abort_.load(); }
  // OK, or Unavailable naming the coordinator's address and how long it has not answered.
  absl::Status CoordinatorLost() const;

 private:
  void Run();
  void Abort(std::unique_lock<std::mutex>& lock);  // called with mu_ held; releases it around on_abort

  const client::CoordinatorClient* coordinator_;
  const std::string job_;
  const HeartbeaterOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  absl::Time last_answer_;                // guarded by mu_
  absl::Status last_error_;               // guarded by mu_: the last failed heartbeat's error
  std::optional<absl::Time> aborted_at_;  // guarded by mu_
  bool grace_expired_ = false;            // guarded by mu_
  std::atomic<bool> abort_{false};
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace zerofit::worker
