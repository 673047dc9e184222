#include "worker/torch/train/torch_training_session.h"

#include <utility>

#include "core/status_macros.h"
#include "worker/data/data_report.h"
#include "worker/data/job_files.h"
#include "worker/torch/train/grpo_session.h"
#include "worker/torch/train/named_step_metrics.h"
#include "worker/torch/train/plan_options.h"

namespace zerofit::worker {

absl::StatusOr<std::unique_ptr<TorchTrainingSession>> TorchTrainingSession::Create(
    const PreferenceTrainOptions& options, const RuntimeOptions& runtime, comm::Communicator* comm) {
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<PreferenceSession> session,
                      PreferenceSession::Create(options, runtime, comm));
  return std::unique_ptr<TorchTrainingSession>(new TorchTrainingSession(std::move(session), comm->rank()));
}

std::string TorchTrainingSession::DataReportText() const {
  return data::FormatDataReport(session_->data_report(), session_->options().data.train, false);
}

absl::StatusOr<metrics::StepMetrics> TorchTrainingSession::Step(int64_t step,
                                                                const MicroBatches& micro_batches) {
  ZF_ASSIGN_OR_RETURN(const StepReport report, session_->Step(step, micro_batches));
  const HostSample host{rank_, absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()), HostPeakRssBytes()};
  return NamedStepMetrics(report, session_->options().task, host);
}

absl::StatusOr<std::vector<metrics::NamedValue>> TorchTrainingSession::Evaluate() {
  ZF_ASSIGN_OR_RETURN(const EvalReport eval, session_->Evaluate());
  return NamedEvalMetrics(eval, session_->options().task);
}

absl::StatusOr<std::unique_ptr<TrainingSession>> MakeTorchTrainingSession(const jobspec::JobPlan& plan,
                                                                          const RuntimeOptions& runtime,
                                                                          comm::Communicator* comm) {
  ZF_ASSIGN_OR_RETURN(const PreferenceTrainOptions options, OptionsFromPlan(plan));
  // Every input file and output place first: a missing input names the spec's field (the loaders name only
  // the path), and an export that could not be written fails now, not after the last step.
  ZF_RETURN_IF_ERROR(data::CheckJobFiles(plan, comm->rank()));
  if (options.task == PreferenceTrainOptions::Task::kGrpo) {
    ZF_ASSIGN_OR_RETURN(std::unique_ptr<GrpoSession> grpo, GrpoSession::Create(options, runtime, comm));
    return std::unique_ptr<TrainingSession>(std::move(grpo));
  }
  ZF_ASSIGN_OR_RETURN(std::unique_ptr<TorchTrainingSession> session,
                      TorchTrainingSession::Create(options, runtime, comm));
  return std::unique_ptr<TrainingSession>(std::move(session));
}

}  // namespace zerofit::worker
