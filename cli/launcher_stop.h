// Stopping a launcher (mpiexec, srun) and every process it started when the user stops `zerofit run` (SIGINT,
// SIGTERM from `timeout`, a supervisor or systemd): SIGTERM to the launcher's process group (Open MPI's
// mpiexec then kills its local ranks, which sit in process groups of their own), then SIGKILL to the group
// once the grace period has passed without the launcher exiting (its orphaned ranks then die of their
// parent watch, launch/parent_watch.h). Not thread-safe: the supervising thread owns it.
#pragma once

#include "absl/time/time.h"
#include "cli/subprocess.h"

namespace zerofit::cli {

class LauncherStop {
 public:
  explicit LauncherStop(absl::Duration grace) : grace_(grace) {}

  // Starts stopping: SIGTERM to the group. Called again (the user insisting, a second Ctrl-C): SIGKILL now.
  void Begin(ChildProcess& launcher, absl::Time now);
  // Called periodically while the launcher runs: SIGKILL to the group once the grace period is over.
  void Tick(ChildProcess& launcher, absl::Time now);
  bool stopping() const { return kill_at_ != absl::InfiniteFuture(); }

 private:
  absl::Duration grace_;
  absl::Time kill_at_ = absl::InfiniteFuture();
  bool killed_ = false;
};

}  // namespace zerofit::cli
