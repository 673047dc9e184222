#include "cli/launcher_stop.h"

#include <signal.h>

namespace zerofit::cli {

void LauncherStop::Begin(ChildProcess& launcher, absl::Time now) {
  if (stopping()) {
    kill_at_ = now;
    Tick(launcher, now);
    return;
  }
  kill_at_ = now + grace_;
  launcher.Signal(SIGTERM);
}

void LauncherStop::Tick(ChildProcess& launcher, absl::Time now) {
  if (killed_ || now < kill_at_) return;
  killed_ = true;
  launcher.Signal(SIGKILL);
}

}  // namespace zerofit::cli
