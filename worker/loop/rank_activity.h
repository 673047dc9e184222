// What one rank is doing, for the coordinator's progress watchdog (coordinator/job_state.h, "Hangs"): the
// loop sets the attempt, the step and the phase (compute, evaluation, checkpoint, report); the communicator
// decorator (comm/hooked_communicator.h) notes each collective as it is issued. Every heartbeat carries
// Describe(), and the watchdog's verdict quotes the hung rank's last one:
//   "attempt 1, step 40: compute for 7.1s; last collective all_gather #1 of the step, issued 7.0s ago"
// A collective is noted when issued, not when it completes (the decorator sees only the call): "last
// collective" is the last one issued, which for a rank blocked in a collective is the one it is blocked in.
//
// Thread-safe: the loop, the training thread's collectives and the heartbeat thread share it.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace zerofit::worker {

class RankActivity {
 public:
  void SetAttempt(int attempt);
  int attempt() const;
  // A new step: phase "compute", this step's collective counts start over.
  void EnterStep(int64_t step);
  int64_t step() const;  // -1 before the first step
  void SetPhase(const std::string& phase);
  // Notes a collective `op` ("all_gather") issued now; returns its 1-based index among this step's
  // collectives of that kind (before the first step: since the start).
  int NoteCollective(const std::string& op);
  std::string Describe() const;

 private:
  mutable std::mutex mu_;
  int attempt_ = 0;
  int64_t step_ = -1;
  std::string phase_ = "starting";
  absl::Time phase_since_ = absl::Now();
  std::map<std::string, int> collectives_;  // this step's count per kind
  std::string last_collective_;             // "all_gather #1"
  absl::Time collective_since_;
};

}  // namespace zerofit::worker
