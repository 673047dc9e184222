// The worker loop's TrainingSession (worker/loop/training_session.h) over a PreferenceSession: what
// zerofit_worker trains with. Steps become named metrics here (NamedStepMetrics), so the loop stays free of
// LibTorch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jobspec/job_plan.h"
#include "worker/loop/training_session.h"
#include "worker/torch/train/preference_session.h"
#include "worker/torch/train/runtime_options.h"

namespace zerofit::worker {

class TorchTrainingSession final : public TrainingSession {
 public:
  // Collective over `comm` (PreferenceSession::Create). `rank` names the rank-local metrics.
  static absl::StatusOr<std::unique_ptr<TorchTrainingSession>> Create(const PreferenceTrainOptions& options,
                                                                      const RuntimeOptions& runtime,
                                                                      comm::Communicator* comm);

  std::vector<int64_t> TrainLengths() const override { return session_->TrainLengths(); }
  std::string DataReportText() const override;
  absl::StatusOr<metrics::StepMetrics> Step(int64_t step, const MicroBatches& micro_batches) override;
  absl::StatusOr<std::vector<metrics::NamedValue>> Evaluate() override;
  absl::Status SaveCheckpoint(const std::string& dir, const std::string& extra, int keep) override {
    return session_->SaveCheckpoint(dir, extra, keep);
  }
  absl::StatusOr<int64_t> LoadCheckpoint(const std::string& dir) override {
    return session_->LoadCheckpoint(dir);
  }
  absl::Status Export(const std::string& dir) override { return session_->Export(dir); }

 private:
  TorchTrainingSession(std::unique_ptr<PreferenceSession> session, int rank)
      : session_(std::move(session)), rank_(rank) {}
  std::unique_ptr<PreferenceSession> session_;
  int rank_;
};

// The session of the plan's task, built from the plan (through OptionsFromPlan, plan_options.h, alone) and
// how this process runs it: GrpoSession (grpo_session.h) for GRPO, TorchTrainingSession for the others.
// Collective over `comm`.
absl::StatusOr<std::unique_ptr<TrainingSession>> MakeTorchTrainingSession(const jobspec::JobPlan& plan,
                                                                          const RuntimeOptions& runtime,
                                                                          comm::Communicator* comm);

}  // namespace zerofit::worker
