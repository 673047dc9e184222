// Test-only (fault_plan.h): the fault-injection pieces zerofit_worker_faults wires around the real ones.
//   FaultySession: a TrainingSession decorator for the step faults (exit, slow, corrupt_report, linger).
//   FaultHook: the hook of a comm::HookedCommunicator that notes each collective in the rank's activity, as
//   zerofit_worker's does, and makes the planned all-gather hang until the communicator is aborted.
// Faults fire in the attempt the rank registered for (RankActivity::attempt), at the step it is in.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/hooked_communicator.h"
#include "worker/loop/fault_plan.h"
#include "worker/loop/rank_activity.h"
#include "worker/loop/training_session.h"

namespace zerofit::worker {

// How long a planned hang waits for Abort() at most (every wait has a deadline): far beyond any watchdog
// limit a test sets, short enough that a broken test ends.
inline constexpr absl::Duration kMaxInjectedHang = absl::Minutes(10);

// The name a corrupt_report fault adds to the step's metrics (refused by the coordinator: not in
// [A-Za-z0-9_./-]).
inline constexpr const char* kCorruptMetricName = "corrupt metric!";

class FaultySession final : public TrainingSession {
 public:
  // `plan` and `activity` outlive the session. `exit` ends the process (zerofit_worker_faults: _exit).
  FaultySession(std::unique_ptr<TrainingSession> inner, const FaultPlan* plan, int rank,
                const RankActivity* activity, std::function<void(int code)> exit);

  std::vector<int64_t> TrainLengths() const override { return inner_->TrainLengths(); }
  std::string DataReportText() const override { return inner_->DataReportText(); }
  absl::StatusOr<metrics::StepMetrics> Step(int64_t step, const MicroBatches& micro_batches) override;
  absl::StatusOr<std::vector<metrics::NamedValue>> Evaluate() override { return inner_->Evaluate(); }
  absl::Status SaveCheckpoint(const std::string& dir, const std::string& extra, int keep) override {
    return inner_->SaveCheckpoint(dir, extra, keep);
  }
  absl::StatusOr<int64_t> LoadCheckpoint(const std::string& dir) override {
    return inner_->LoadCheckpoint(dir);
  }
  absl::Status Export(const std::string& dir) override { return inner_->Export(dir); }

 private:
  std::unique_ptr<TrainingSession> inner_;
  const FaultPlan* plan_;
  const int rank_;
  const RankActivity* activity_;
  std::function<void(int)> exit_;
};

// Notes `op` in `activity`; for the plan's hang_allgather of this rank, attempt and step (the step's first
// all-gather), blocks until `self` is aborted (or kMaxInjectedHang) and fails the call.
absl::Status FaultHook(const FaultPlan& plan, int rank, RankActivity& activity,
                       comm::HookedCommunicator& self, const char* op);

}  // namespace zerofit::worker
