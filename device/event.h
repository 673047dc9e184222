// device::Event: a marker in a device::Stream (stream.h) that orders work across streams and with the host.
//
// Semantics follow CUDA's: `event.Record(s)` marks the work enqueued on s so far, and `event.Wait(t)` makes
// work enqueued on t afterwards run only once that marked work has finished (a later Record does not change
// what an earlier Wait waits for). Event methods are thread-safe.
#pragma once

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace zerofit::device {

class Stream;

class Event {
 public:
  virtual ~Event() = default;
  // Marks the work enqueued on `stream` so far.
  virtual absl::Status Record(Stream& stream) = 0;
  // Work enqueued on `stream` from now on runs after the work marked by the last Record().
  virtual absl::Status Wait(Stream& stream) = 0;
  // Blocks the host until the marked work has run; DeadlineExceeded after `timeout`.
  virtual absl::Status Synchronize(absl::Duration timeout) = 0;
  // True once the marked work has run (also when nothing was ever recorded).
  virtual bool Query() = 0;
};

}  // namespace zerofit::device
