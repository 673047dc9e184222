#include "cli/blocked_signals.h"

#include <pthread.h>
#include <time.h>

namespace zerofit::cli {

BlockedSignals::BlockedSignals(std::initializer_list<int> signals) {
  sigemptyset(&set_);
  for (int sig : signals) sigaddset(&set_, sig);
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
}

BlockedSignals::~BlockedSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

int BlockedSignals::Take() {
  struct timespec zero = {0, 0};
  const int sig = sigtimedwait(&set_, nullptr, &zero);
  return sig > 0 ? sig : 0;
}

}  // namespace zerofit::cli
