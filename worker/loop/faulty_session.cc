#include "worker/loop/faulty_session.h"

#include <string>
#include <utility>

#include "absl/time/clock.h"

namespace zerofit::worker {

FaultySession::FaultySession(std::unique_ptr<TrainingSession> inner, const FaultPlan* plan, int rank,
                             const RankActivity* activity, std::function<void(int)> exit)
    : inner_(std::move(inner)), plan_(plan), rank_(rank), activity_(activity), exit_(std::move(exit)) {}

absl::StatusOr<metrics::StepMetrics> FaultySession::Step(int64_t step, const MicroBatches& micro_batches) {
  const int attempt = activity_->attempt();
  if (const Fault* f = plan_->Find(FaultKind::kExit, rank_, attempt, step)) exit_(f->code);
  if (const Fault* f = plan_->Find(FaultKind::kSlow, rank_, attempt, step)) {
    absl::SleepFor(absl::Seconds(f->seconds));
  }
  absl::StatusOr<metrics::StepMetrics> m = inner_->Step(step, micro_batches);
  if (m.ok() && plan_->Find(FaultKind::kCorruptReport, rank_, attempt, step)) m->Set(kCorruptMetricName, 1.0);
  if (const Fault* f = plan_->Find(FaultKind::kLinger, rank_, attempt, step)) {
    absl::SleepFor(absl::Seconds(f->seconds));
  }
  return m;
}

absl::Status FaultHook(const FaultPlan& plan, int rank, RankActivity& activity,
                       comm::HookedCommunicator& self, const char* op) {
  const int index = activity.NoteCollective(op);
  if (std::string(op) != "all_gather" || index != 1 ||
      !plan.Find(FaultKind::kHangAllGather, rank, activity.attempt(), activity.step())) {
    return absl::OkStatus();
  }
  return self.WaitForAbort(kMaxInjectedHang);
}

}  // namespace zerofit::worker
