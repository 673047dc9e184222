#include "sharding/device_timeline.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "core/status_macros.h"

namespace zerofit::sharding {

const char* DeviceStageName(DeviceStage s) {
  switch (s) {
    case DeviceStage::kForward:
      return "forward";
    case DeviceStage::kBackward:
      return "backward";
    case DeviceStage::kUpdate:
      return "update";
    case DeviceStage::kNumStages:
      break;
  }
  return "?";
}

std::string DeviceStepTimes::ToString() const {
  std::string out = absl::StrFormat("device step %d: %.1f ms |", step, step_ms);
  for (size_t i = 0; i < stage_ms.size(); ++i) {
    absl::StrAppendFormat(&out, " %s %.1f |", DeviceStageName(static_cast<DeviceStage>(i)), stage_ms[i]);
  }
  absl::StrAppendFormat(&out, " gap %.1f", gap_ms);
  return out;
}

DeviceTimeline::DeviceTimeline(device::Device* device, device::Stream* stream)
    : device_(device), stream_(stream) {}

size_t DeviceTimeline::Mark() {
  if (!status_.ok()) return kOpen;
  Slot& s = slots_[current_];
  if (s.used == s.events.size()) {
    absl::StatusOr<std::unique_ptr<device::Event>> e = device_->CreateTimingEvent();
    if (!e.ok()) {
      status_ = e.status();
      return kOpen;
    }
    s.events.push_back(std::move(*e));
  }
  status_ = s.events[s.used]->Record(*stream_);
  return status_.ok() ? s.used++ : kOpen;
}

void DeviceTimeline::Open(size_t slot) {
  current_ = slot;
  Slot& s = slots_[slot];
  s.used = 0;
  s.intervals.clear();
  s.pending = false;
  open_ = Mark() != kOpen;
}

int DeviceTimeline::Begin(DeviceStage stage) {
  if (!open_) Open(current_);
  const size_t begin = Mark();
  if (begin == kOpen) return -1;
  Slot& s = slots_[current_];
  s.intervals.push_back(Interval{stage, begin, kOpen});
  return static_cast<int>(s.intervals.size() - 1);
}

void DeviceTimeline::End(int handle) {
  Slot& s = slots_[current_];
  if (handle < 0 || !open_ || static_cast<size_t>(handle) >= s.intervals.size()) return;
  s.intervals[handle].end = Mark();
}

size_t DeviceTimeline::NextSlot() {
  size_t oldest = kOpen;
  for (size_t i = 0; i < kSlots; ++i) {
    if (i == current_) continue;
    if (!slots_[i].pending) return i;
    if (oldest == kOpen || slots_[i].step < slots_[oldest].step) oldest = i;
  }
  ++dropped_;  // every other slot still waits for its markings: the oldest step's times are given up
  return oldest;
}

std::optional<DeviceStepTimes> DeviceTimeline::EndStep() {
  if (!open_) Open(current_);
  Slot& s = slots_[current_];
  s.end = Mark();
  if (s.end == kOpen) return std::nullopt;
  s.step = ++ended_;
  s.pending = true;
  Open(NextSlot());
  return Collect();
}

std::optional<DeviceStepTimes> DeviceTimeline::Collect() {
  std::optional<DeviceStepTimes> latest;
  for (Slot& s : slots_) {
    if (!s.pending || !s.events[s.end]->Query()) continue;
    s.pending = false;
    absl::StatusOr<DeviceStepTimes> t = Read(s);
    if (!t.ok()) {
      status_ = t.status();
      return std::nullopt;
    }
    if (latest) ++dropped_;  // two steps finished between calls: the earlier is not reported
    if (!latest || t->step > latest->step) {
      latest = *t;
    }
  }
  return latest;
}

absl::StatusOr<DeviceStepTimes> DeviceTimeline::Read(Slot& s) {
  DeviceStepTimes t;
  t.step = s.step;
  t.ended_after = ended_ - s.step;
  device::Event& start = *s.events[0];
  ZF_ASSIGN_OR_RETURN(t.step_ms, s.events[s.end]->MillisecondsSince(start));
  double staged = 0;
  for (const Interval& iv : s.intervals) {
    if (iv.end == kOpen) continue;  // its scope ended by an error before it was marked
    ZF_ASSIGN_OR_RETURN(const double ms, s.events[iv.end]->MillisecondsSince(*s.events[iv.begin]));
    t.stage_ms[static_cast<size_t>(iv.stage)] += ms;
    staged += ms;
  }
  t.gap_ms = std::max(0.0, t.step_ms - staged);
  return t;
}

}  // namespace zerofit::sharding
