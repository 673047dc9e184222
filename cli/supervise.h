// One job's attempts, each started by a launcher process (mpiexec for `zerofit run`, srun inside a Slurm
// allocation), supervised by an embedded coordinator: logs are printed as they arrive, the launcher's exit
// is reported (a failed attempt is retried from its checkpoint by the next launch), until the job ends or
// the caller stops.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/job_control.h"
#include "cli/progress_reporter.h"
#include "cli/subprocess.h"

namespace zerofit::cli {

// What to do once an attempt's launcher has exited.
enum class AfterExit {
  kReportAndContinue,  // report the exit to the coordinator; launch again unless the job ended
  kReportAndStop,      // report the exit; stop supervising
  kStop,               // stop supervising without reporting (the caller settles the job)
};

struct SuperviseHooks {
  std::function<std::vector<std::string>()> command;  // the launcher of one attempt
  std::vector<std::string> env;  // NAME=VALUE added to the launcher's environment (the workers inherit it)
  // Called about every 300 ms while an attempt runs (may signal the launcher).
  std::function<void(ChildProcess& launcher)> poll;
  std::function<AfterExit(int exit_code)> after_exit;
  // Print the job's log lines from the first one (false: only lines logged from now on, e.g. when an
  // earlier run of the same job already printed the rest to the same output).
  bool print_earlier_logs = true;
  // Decides which of the job's lines are printed, and how (progress_reporter.h); must outlive the call.
  // Null: every line, as it comes.
  ProgressReporter* progress = nullptr;
};

struct Supervised {
  coordinator::JobRecord job;
  int last_exit_code = 0;  // of the last launcher (0 if none ran)
};

absl::StatusOr<Supervised> SuperviseJob(JobControl& c, const std::string& job_id,
                                        const SuperviseHooks& hooks);

}  // namespace zerofit::cli
