// Signals a launcher handles on its own schedule: blocked in every thread and collected with Take (no
// asynchronous handler). Construct it before any thread starts (threads inherit the mask: the embedded
// coordinator's included); children get the signals back unblocked and at their defaults (ChildProcess).
#pragma once

#include <signal.h>

#include <initializer_list>

namespace zerofit::cli {

class BlockedSignals {
 public:
  explicit BlockedSignals(std::initializer_list<int> signals);
  // Restores the mask it found: a signal still pending is then delivered (its default action, usually the
  // end of the process).
  ~BlockedSignals();
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;

  // A pending signal of the set (taking it), or 0 without waiting.
  int Take();

 private:
  sigset_t set_, old_;
};

}  // namespace zerofit::cli
