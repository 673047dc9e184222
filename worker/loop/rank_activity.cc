#include "worker/loop/rank_activity.h"

#include "absl/strings/str_cat.h"

namespace zerofit::worker {
namespace {

std::string Ago(absl::Time since) {
  return absl::FormatDuration(absl::Trunc(absl::Now() - since, absl::Milliseconds(100)));
}

}  // namespace

void RankActivity::SetAttempt(int attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  attempt_ = attempt;
}

int RankActivity::attempt() const {
  std::lock_guard<std::mutex> lock(mu_);
  return attempt_;
}

void RankActivity::EnterStep(int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  step_ = step;
  phase_ = "compute";
  phase_since_ = absl::Now();
  collectives_.clear();
  last_collective_.clear();
}

int64_t RankActivity::step() const {
  std::lock_guard<std::mutex> lock(mu_);
  return step_;
}

void RankActivity::SetPhase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = phase;
  phase_since_ = absl::Now();
}

int RankActivity::NoteCollective(const std::string& op) {
  std::lock_guard<std::mutex> lock(mu_);
  const int index = ++collectives_[op];
  last_collective_ = absl::StrCat(op, " #", index, step_ >= 0 ? " of the step" : "");
  collective_since_ = absl::Now();
  return index;
}

std::string RankActivity::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string s = absl::StrCat("attempt ", attempt_, ", ");
  if (step_ >= 0) absl::StrAppend(&s, "step ", step_, ": ");
  absl::StrAppend(&s, phase_, " for ", Ago(phase_since_));
  if (!last_collective_.empty())
    absl::StrAppend(&s, "; last collective ", last_collective_, ", issued ", Ago(collective_since_), " ago");
  return s;
}

}  // namespace zerofit::worker
