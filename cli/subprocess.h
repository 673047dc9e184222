// Child processes for the launchers (mpiexec, srun) and for Slurm's commands (sbatch, scontrol, squeue).
// Each child:
//  - leads a process group of its own, so that one signal reaches it and the helpers it starts in its group
//    (ChildProcess::Signal signals the group), and a Ctrl-C at the terminal reaches zerofit alone, which
//    decides how to stop the launcher. (Open MPI 4 puts each rank in a group of its own: mpiexec stops its
//    ranks when it gets SIGTERM; a rank whose mpiexec vanished dies of launch/parent_watch.h.)
//  - gets SIGTERM when the thread that spawned it ends (PR_SET_PDEATHSIG), so that a SIGKILLed zerofit does
//    not leave its launcher running; SIGTERM rather than SIGKILL because Open MPI's mpiexec kills its local
//    ranks when it gets SIGTERM and would orphan them if it died of SIGKILL;
//  - reads stdin from /dev/null (a background process group reading the terminal would be stopped);
//  - has the signals this process blocks unblocked and reset to their defaults.
// A ChildProcess that is destroyed while still running is killed with its group and reaped (no zombies, no
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
  // Precondition: the calling thread outlives the child, or the child is meant to get SIGTERM when it
  // ends (PR_SET_PDEATHSIG follows the spawning thread, not the process): call it from the main thread.
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
  // Sends `sig` to the child's process group (the child and what it started), while the child is unreaped.
  void Signal(int sig);
  pid_t pid() const { return pid_; }

 private:
  friend absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                                  absl::Duration timeout);
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;  // -1: reaped or moved from; else also the id of its process group
};

// Runs `argv` to completion, capturing its output; killed (DeadlineExceeded) if it takes longer than
// `timeout`.
absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv, absl::Duration timeout);

}  // namespace zerofit::cli
