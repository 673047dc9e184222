// DeviceTimeline: a training step's stages on the device's own clock, beside StepProfile's host clocks.
//
// On a GPU the host returns from forward and backward as soon as their kernels are launched, so the host's
// clocks show launch time, and whichever stage synchronises first carries the rest. These times come from
// timing events (device::Event::MillisecondsSince) recorded on the compute stream at each stage's begin and
// end, so they are when the device ran the stage: where a step's device time goes, without a profiler.
//
// A step's window runs from the previous step's end marking to its own (back to back, like the host
// profile's), and splits into
//   forward, backward   the caller's intervals (StepProfile's kForward/kBackward scopes), summed over the
//                       step's micro-batches;
//   update              from Step()'s entry to its end on the compute stream: the wait for the last
//                       reduce-scatters, the norm, AdamW (or offload's copies) and the all-gather that the
//                       next forward waits for;
//   gap                 the window less those: the compute stream between stages, waiting for the host
//                       (data, launches, host syncs, or anything run between steps, such as a GRPO rollout).
// When forward's device time is close to its host time, the forward is launch-bound.
//
// Nothing here waits: EndStep returns the times of the latest ended step whose markings have all run, with
// that step's number. In training that is at the latest the previous step (a step's gradient-norm sync
// waits for work queued after the previous step's markings), and on a GPU usually exactly that one (the
// update's kernels are still running when Step() returns). A few steps' events are kept; if their markings
// have not run when their slot is needed again, those steps' times are given up (dropped()).
//
// Errors: the first failure to create, record or read an event stops the timeline (status()); training is
// not affected. Not thread-safe: the engine's thread only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "device/device.h"

namespace zerofit::sharding {

enum class DeviceStage { kForward = 0, kBackward, kUpdate, kNumStages };
const char* DeviceStageName(DeviceStage s);  // "forward", "backward", "update"

struct DeviceStepTimes {
  int64_t step = 0;         // which step: the timeline's count of EndStep calls, from 1
  int64_t ended_after = 0;  // steps ended after it when EndStep returned it (0: the step just ended)
  double step_ms = 0;       // the step's window on the compute stream
  std::array<double, static_cast<size_t>(DeviceStage::kNumStages)> stage_ms{};
  double gap_ms = 0;             // step_ms less the stages (never below 0)
  std::string ToString() const;  // "device step 3: 212.4 ms | forward 60.1 | backward 130.2 | ..."
};

class DeviceTimeline {
 public:
  // Marks `stream` (not owned; must outlive this) with timing events of `device` (not owned).
  DeviceTimeline(device::Device* device, device::Stream* stream);
  DeviceTimeline(const DeviceTimeline&) = delete;
  DeviceTimeline& operator=(const DeviceTimeline&) = delete;

  // Opens an interval of `stage` (marks the stream now); its handle goes to End. -1 once stopped.
  int Begin(DeviceStage stage);
  // Closes the interval `handle` (marks the stream now). -1 is ignored.
  void End(int handle);
  // Ends the step (marks its end, which is also the next step's start) and returns the times of the latest
  // ended step whose markings have all run, unless they were returned before. Never waits.
  std::optional<DeviceStepTimes> EndStep();

  absl::Status status() const { return status_; }
  int64_t dropped() const { return dropped_; }  // ended steps whose times were given up

 private:
  struct Interval {
    DeviceStage stage;
    size_t begin;
    size_t end;  // kOpen until End
  };
  struct Slot {
    std::vector<std::unique_ptr<device::Event>> events;  // [0]: the window's start; reused across steps
    size_t used = 0;
    std::vector<Interval> intervals;
    size_t end = 0;        // the window's end marking (pending slots)
    int64_t step = 0;      // the step it holds once ended
    bool pending = false;  // ended, times not read yet
  };
  static constexpr size_t kOpen = static_cast<size_t>(-1);
  static constexpr size_t kSlots = 3;

  // Records the next event of the open slot; its index, or kOpen after a failure.
  size_t Mark();
  void Open(size_t slot);
  size_t NextSlot();
  std::optional<DeviceStepTimes> Collect();
  absl::StatusOr<DeviceStepTimes> Read(Slot& s);

  device::Device* const device_;
  device::Stream* const stream_;
  std::array<Slot, kSlots> slots_;
  size_t current_ = 0;
  bool open_ = false;  // slots_[current_] has its start marking
  int64_t ended_ = 0;
  int64_t dropped_ = 0;
  absl::Status status_;
};

// Begin/End of one interval as a scope (timeline may be null: nothing is marked).
class ScopedDeviceStage {
 public:
  ScopedDeviceStage(DeviceTimeline* timeline, DeviceStage stage)
      : timeline_(timeline), handle_(timeline != nullptr ? timeline->Begin(stage) : -1) {}
  ~ScopedDeviceStage() {
    if (timeline_ != nullptr) timeline_->End(handle_);
  }
  ScopedDeviceStage(const ScopedDeviceStage&) = delete;
  ScopedDeviceStage& operator=(const ScopedDeviceStage&) = delete;

 private:
  DeviceTimeline* timeline_;
  int handle_;
};

}  // namespace zerofit::sharding
