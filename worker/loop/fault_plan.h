// Test-only fault injection (STYLE 17): which fault a rank suffers at which step of which attempt, read from
// the ZEROFIT_FAULTS environment variable by zerofit_worker_faults, a build of zerofit_worker made for
// tests (worker/torch/programs/worker_main.cc with ZEROFIT_FAULT_INJECTION). The production zerofit_worker
// neither links this library nor reads the variable.
//
//   ZEROFIT_FAULTS="rank=1,step=40,fault=hang_allgather;rank=0,step=7,fault=slow,seconds=0.3"
//
// Faults, separated by ';', each a list of key=value separated by ',':
//   rank=R, step=S      required: the rank and the (0-based) step where it fires
//   fault=hang_allgather the rank's first all-gather of step S blocks until its communicator is aborted (the
//                        coordinator's watchdog must notice and abort the attempt)
//   fault=exit          the rank exits at once with `code` (default 3) as step S starts, reporting nothing
//   fault=slow          every step from S on takes `seconds` (default 0.3) longer on the rank
//   fault=corrupt_report step S's metrics carry a name the coordinator must refuse ("corrupt metric!")
//   fault=linger        after step S's work (its collectives done) the rank waits `seconds` (default 0.3)
//                        before it reports the step and asks for step S + 1, which the other ranks already
//                        hold meanwhile (a cancel or preemption then lands between the ranks' requests)
//   attempt=A           the attempt in which it fires (default 1): a restarted attempt runs clean
// Errors name the variable, the fault's position and text, and the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zerofit::worker {

enum class FaultKind { kHangAllGather, kExit, kSlow, kCorruptReport, kLinger };
const char* FaultKindName(FaultKind kind);

struct Fault {
  FaultKind kind = FaultKind::kExit;
  int rank = 0;
  int64_t step = 0;
  int attempt = 1;
  int code = 3;          // exit
  double seconds = 0.3;  // slow, linger
};

class FaultPlan {
 public:
  static constexpr size_t kMaxTextBytes = 4096;
  static constexpr size_t kMaxFaults = 64;

  // An empty text is an empty plan. `source` names the text in errors.
  static absl::StatusOr<FaultPlan> Parse(const std::string& text,
                                         const std::string& source = "ZEROFIT_FAULTS");

  // The fault of `kind` for `rank` in `attempt` at `step` (slow: at any step from its own on); null if none.
  const Fault* Find(FaultKind kind, int rank, int attempt, int64_t step) const;
  const std::vector<Fault>& faults() const { return faults_; }
  std::string Describe() const;  // "rank 1, step 40, attempt 1: hang_allgather; ..."

 private:
  std::vector<Fault> faults_;
};

}  // namespace zerofit::worker
