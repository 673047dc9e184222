// device::Event: a marker in a device::Stream (stream.h) that orders work across streams and with the host.
//
// Semantics follow CUDA's: `event.Record(s)` marks the work enqueued on s so far, and `event.Wait(t)` makes
// work enqueued on t afterwards run only once that marked work has finished (a later Record does not change
// what an earlier Wait waits for). Event methods are thread-safe.
//
// A timing event (Device::CreateTimingEvent) also says when the device reached its marking, on the device's
// own clock: MillisecondsSince gives the time between two of them as the device ran the work (on CUDA
// cudaEventElapsedTime, ~0.5 us resolution; on the host and test devices the host clock when the stream got
// there). On a GPU that is what a step's stages cost the device, where the host's clocks show only how long
// it took to launch them.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  // Milliseconds from `start`'s last marking to this event's, on the device's clock (negative when this
  // one ran first). FailedPrecondition while either has not run or was never recorded; InvalidArgument when
  // either is not a timing event or they belong to different devices.
  virtual absl::StatusOr<double> MillisecondsSince(Event& start) = 0;
};

}  // namespace zerofit::device
