#include "device/host/host_device.h"

#include <cstring>
#include <mutex>

#include "core/status_macros.h"

namespace zerofit::device {
namespace {

// Inline streams have nothing pending: an event is complete the moment it is recorded, and a timing event
// keeps that time.
class InlineEvent final : public Event {
 public:
  explicit InlineEvent(bool timing) : timing_(timing) {}
  absl::Status Record(Stream&) override {
    if (timing_) {
      std::lock_guard<std::mutex> lock(mu_);
      recorded_at_ = absl::Now();
    }
    return absl::OkStatus();
  }
  absl::Status Wait(Stream&) override { return absl::OkStatus(); }
  absl::Status Synchronize(absl::Duration) override { return absl::OkStatus(); }
  bool Query() override { return true; }
  absl::StatusOr<double> MillisecondsSince(Event& start) override {
    auto* other = dynamic_cast<InlineEvent*>(&start);
    if (other == nullptr)
      return absl::InvalidArgumentError("host event: timed against another device's event");
    if (!timing_ || !other->timing_) {
      return absl::InvalidArgumentError("host event: MillisecondsSince needs two timing events");
    }
    ZF_ASSIGN_OR_RETURN(const absl::Time begin, other->RecordedAt());
    ZF_ASSIGN_OR_RETURN(const absl::Time end, RecordedAt());
    return absl::ToDoubleMilliseconds(end - begin);
  }

 private:
  absl::StatusOr<absl::Time> RecordedAt() {
    std::lock_guard<std::mutex> lock(mu_);
    if (recorded_at_ == absl::InfinitePast())
      return absl::FailedPreconditionError("host event: never recorded");
    return recorded_at_;
  }

  const bool timing_;
  std::mutex mu_;
  absl::Time recorded_at_ = absl::InfinitePast();  // guarded by mu_
};

class InlineStream final : public Stream {
 public:
  absl::Status Copy(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Fill(void* dst, uint8_t value, size_t bytes) override {
    HostFill(dst, value, bytes);
    return absl::OkStatus();
  }
  absl::Status Accumulate(const void* src, core::DType src_type, float* acc, size_t n, float scale) override {
    HostAccumulate(src, src_type, acc, n, scale);
    return absl::OkStatus();
  }
  absl::Status SumOfSquares(const void* src, core::DType dtype, size_t n, double* out) override {
    HostSumOfSquares(src, dtype, n, out);
    return absl::OkStatus();
  }
  absl::Status Convert(const void* src, core::DType src_type, void* dst, core::DType dst_type,
                       size_t n) override {
    HostConvert(src, src_type, dst, dst_type, n);
    return absl::OkStatus();
  }
  absl::Status AdamW(const AdamWArgs& args) override {
    HostAdamW(args);
    return absl::OkStatus();
  }
  absl::Status AdamW8bit(const AdamW8bitArgs& args) override {
    HostAdamW8bit(args);
    return absl::OkStatus();
  }
  absl::Status HostFunc(std::function<absl::Status()> fn) override {
    absl::Status s = fn();
    if (!s.ok() && status_.ok()) status_ = s;
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override {
    return std::unique_ptr<Event>(std::make_unique<InlineEvent>(/*timing=*/false));
  }
  absl::Status Synchronize(absl::Duration) override { return status_; }
  absl::Status status() override { return status_; }

 private:
  absl::Status status_;
};

}  // namespace

HostDevice::HostDevice()
    : compute_(std::make_unique<InlineStream>()), counter_(std::make_shared<MemoryCounter>()) {}

HostDevice::~HostDevice() = default;

absl::StatusOr<Buffer> HostDevice::Allocate(size_t bytes, MemoryKind kind) {
  ZF_ASSIGN_OR_RETURN(Buffer b, AllocateHostMemory(bytes, kind));
  // "Device" memory is counted like a real device's, so memory_stats() means the same everywhere.
  if (kind != MemoryKind::kDevice) return b;
  return CountedBuffer(std::move(b), counter_);
}

absl::StatusOr<std::unique_ptr<Stream>> HostDevice::CreateStream() {
  return std::unique_ptr<Stream>(std::make_unique<InlineStream>());
}

absl::StatusOr<std::unique_ptr<Event>> HostDevice::CreateEvent() {
  return std::unique_ptr<Event>(std::make_unique<InlineEvent>(/*timing=*/false));
}

absl::StatusOr<std::unique_ptr<Event>> HostDevice::CreateTimingEvent() {
  return std::unique_ptr<Event>(std::make_unique<InlineEvent>(/*timing=*/true));
}

MemoryStats HostDevice::memory_stats() const {
  MemoryStats s;
  s.allocated_bytes = counter_->allocated();
  s.peak_allocated_bytes = counter_->peak();
  return s;
}

}  // namespace zerofit::device
