// Child processes for the launchers (mpiexec, srun) and for Slurm's commands (sbatch, scontrol, squeue):
// started with posix_spawnp, with the signals this process blocks unblocked and reset to their defaults in
// the child. A ChildProcess that is destroyed while still running is killed and reaped (no zombies, no
// orphans).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zerofit::cli {

struct CommandResult {
  int exit_code = 0;
  std::string output;  // stdout and stderr together
};

class ChildProcess {
 public:
  // `env`: NAME=VALUE entries added to this process's environment for the child (replacing a variable of
  // the same name): how a secret reaches a child without appearing on its command line.
  static absl::StatusOr<ChildProcess> Spawn(const std::vector<std::string>& argv,
                                            const std::vector<std::string>& env = {});
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ~ChildProcess();

  // The exit code once it ended (128 + signal if killed), without blocking.
  absl::StatusOr<std::optional<int>> Poll();
  // Waits until it ends or `timeout` passes (then nullopt).
  absl::StatusOr<std::optional<int>> Wait(absl::Duration timeout);
  void Signal(int sig);
  pid_t pid() const { return pid_; }

 private:
  friend absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                                  absl::Duration timeout);
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;  // -1: reaped or moved from
};

// Runs `argv` to completion, capturing its output; killed (DeadlineExceeded) if it takes longer than
// `timeout`.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, absl::Duration timeout);

}  // namespace zerofit::cli
