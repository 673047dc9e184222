#include "launch/parent_watch.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"

namespace zerofit::launch {

absl::Status ExitWithParent(int signal, pid_t original_parent) {
  if (::prctl(PR_SET_PDEATHSIG, signal) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("prctl(PR_SET_PDEATHSIG, ", signal, ")"));
  }
  // The parent may have died between `original_parent` and the prctl: then the kernel sends nothing.
  if (::getppid() != original_parent) {
    ::raise(signal);
    return absl::FailedPreconditionError(absl::StrCat("the launcher that started this process (pid ",
                                                      original_parent, ") has exited: nothing to run for"));
  }
  return absl::OkStatus();
}

}  // namespace zerofit::launch
