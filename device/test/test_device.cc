#include "device/test/test_device.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/serial_executor.h"
#include "core/status_macros.h"

namespace zerofit::device {

// The device-wide thread that runs host functions in serial_host_functions mode.
class HostFunctionThread {
 public:
  // Runs fn on the thread after every host function submitted before it; waits for it up to `timeout`.
  absl::Status Run(const std::function<absl::Status()>& fn, absl::Duration timeout) {
    auto result = std::make_shared<absl::Status>();
    const uint64_t ticket = executor_.Submit([fn, result] { *result = fn(); });
    ZF_RETURN_IF_ERROR(executor_.WaitFor(ticket, timeout));
    return *result;  // written before WaitFor saw the ticket finish (ordered by the executor's mutex)
  }

 private:
  core::SerialExecutor executor_;
};

namespace {

using Op = std::function<absl::Status()>;

std::unique_ptr<Event> NewDelayedEvent(absl::Duration timeout, bool timing = false);

// A queue of operations run in order by one thread, each after a random delay.
class DelayedStream final : public Stream {
 public:
  DelayedStream(uint64_t seed, const TestDeviceOptions& options,
                std::shared_ptr<std::atomic<uint64_t>> host_functions_run,
                std::shared_ptr<HostFunctionThread> host_thread)
      : options_(options),
        host_functions_run_(std::move(host_functions_run)),
        host_thread_(std::move(host_thread)),
        rng_(seed),
        thread_([this] { Loop(); }) {}

  ~DelayedStream() override {
    (void)Synchronize(options_.wait_timeout);
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  absl::Status Copy(void* dst, const void* src, size_t bytes) override {
    return Enqueue([=] {
      if (bytes > 0) std::memmove(dst, src, bytes);
      return absl::OkStatus();
    });
  }
  absl::Status Fill(void* dst, uint8_t value, size_t bytes) override {
    return Enqueue([=] { return HostFill(dst, value, bytes), absl::OkStatus(); });
  }
  absl::Status Accumulate(const void* src, core::DType src_type, float* acc, size_t n, float scale) override {
    return Enqueue([=] { return HostAccumulate(src, src_type, acc, n, scale), absl::OkStatus(); });
  }
  absl::Status SumOfSquares(const void* src, core::DType dtype, size_t n, double* out) override {
    return Enqueue([=] { return HostSumOfSquares(src, dtype, n, out), absl::OkStatus(); });
  }
  absl::Status Convert(const void* src, core::DType src_type, void* dst, core::DType dst_type,
                       size_t n) override {
    return Enqueue([=] { return HostConvert(src, src_type, dst, dst_type, n), absl::OkStatus(); });
  }
  absl::Status AdamW(const AdamWArgs& args) override {
    return Enqueue([=] { return HostAdamW(args), absl::OkStatus(); });
  }
  absl::Status AdamW8bit(const AdamW8bitArgs& args) override {
    return Enqueue([=] { return HostAdamW8bit(args), absl::OkStatus(); });
  }
  absl::Status HostFunc(std::function<absl::Status()> fn) override {
    return Enqueue([fn = std::move(fn), count = host_functions_run_, host = host_thread_,
                    timeout = options_.wait_timeout]() -> absl::Status {
      ++*count;
      return host != nullptr ? host->Run(fn, timeout) : fn();
    });
  }

  absl::StatusOr<std::unique_ptr<Event>> CreateEvent() override {
    return NewDelayedEvent(options_.wait_timeout);
  }

  absl::Status Synchronize(absl::Duration timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = enqueued_;
    if (!done_cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return done_ >= target; })) {
      return absl::DeadlineExceededError(absl::StrCat("test device: stream did not drain within ",
                                                      absl::FormatDuration(timeout), " (", target - done_,
                                                      " operations pending)"));
    }
    return status_;
  }

  absl::Status status() override {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }

  absl::Status Enqueue(Op op) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(op));
      ++enqueued_;
    }
    cv_.notify_all();
    return absl::OkStatus();
  }

  absl::Duration wait_timeout() const { return options_.wait_timeout; }

 private:
  void Loop() {
    int64_t bound = absl::ToInt64Microseconds(options_.max_delay);
    if (options_.vary_stream_speed) bound = bound * std::array<int64_t, 3>{1, 4, 16}[rng_() % 3] / 4;
    std::uniform_int_distribution<int64_t> delay_us(0, bound);
    while (true) {
      Op op;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng_)));
      absl::Status s = op();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!s.ok() && status_.ok()) status_ = s;
        ++done_;
      }
      done_cv_.notify_all();
    }
  }

  const TestDeviceOptions options_;
  const std::shared_ptr<std::atomic<uint64_t>> host_functions_run_;
  const std::shared_ptr<HostFunctionThread> host_thread_;  // null: this stream's thread runs host functions
  std::mt19937_64 rng_;                                    // the stream thread's only
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable done_cv_;
  std::deque<Op> queue_;   // guarded by mu_
  uint64_t enqueued_ = 0;  // guarded by mu_
  uint64_t done_ = 0;      // guarded by mu_
  absl::Status status_;    // guarded by mu_
  bool stop_ = false;      // guarded by mu_
  std::thread thread_;     // last: starts after the members it uses exist
};

// Generation counters: Record numbers each marking; the marking completes when its stream reaches it.
struct EventState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;                           // last generation handed out by Record()
  uint64_t completed = 0;                          // highest generation that ran
  absl::Time completed_at = absl::InfinitePast();  // when it ran (the stream thread's clock)

  void Complete(uint64_t gen) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (gen > completed) {
        completed = gen;
        completed_at = absl::Now();
      }
    }
    cv.notify_all();
  }
  // When the last recorded marking ran; FailedPrecondition while it has not (or nothing was recorded).
  absl::StatusOr<absl::Time> LastMarkingRanAt() {
    std::lock_guard<std::mutex> lock(mu);
    if (recorded == 0) return absl::FailedPreconditionError("test device: event never recorded");
    if (completed < recorded) return absl::FailedPreconditionError("test device: event not reached yet");
    return completed_at;
  }
  bool WaitFor(uint64_t gen, absl::Duration timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return completed >= gen; });
  }
};

class DelayedEvent final : public Event {
 public:
  DelayedEvent(absl::Duration timeout, bool timing)
      : timeout_(timeout), timing_(timing), state_(std::make_shared<EventState>()) {}

  absl::Status Record(Stream& stream) override {
    ZF_ASSIGN_OR_RETURN(DelayedStream * s, Cast(stream));
    uint64_t gen;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      gen = ++state_->recorded;
    }
    return s->Enqueue([state = state_, gen] { return state->Complete(gen), absl::OkStatus(); });
  }

  absl::Status Wait(Stream& stream) override {
    ZF_ASSIGN_OR_RETURN(DelayedStream * s, Cast(stream));
    const uint64_t gen = Recorded();
    return s->Enqueue([state = state_, gen, timeout = timeout_]() -> absl::Status {
      if (state->WaitFor(gen, timeout)) return absl::OkStatus();
      return absl::DeadlineExceededError(
          absl::StrCat("test device: an event wait inside a stream passed its ",
                       absl::FormatDuration(timeout), " deadline"));
    });
  }

  absl::Status Synchronize(absl::Duration timeout) override {
    if (state_->WaitFor(Recorded(), timeout)) return absl::OkStatus();
    return absl::DeadlineExceededError(
        absl::StrCat("test device: event not reached within ", absl::FormatDuration(timeout)));
  }

  bool Query() override { return state_->WaitFor(Recorded(), absl::ZeroDuration()); }

  absl::StatusOr<double> MillisecondsSince(Event& start) override {
    auto* other = dynamic_cast<DelayedEvent*>(&start);
    if (other == nullptr)
      return absl::InvalidArgumentError("test device: timed against another device's event");
    if (!timing_ || !other->timing_) {
      return absl::InvalidArgumentError("test device: MillisecondsSince needs two timing events");
    }
    ZF_ASSIGN_OR_RETURN(const absl::Time begin, other->state_->LastMarkingRanAt());
    ZF_ASSIGN_OR_RETURN(const absl::Time end, state_->LastMarkingRanAt());
    return absl::ToDoubleMilliseconds(end - begin);
  }

 private:
  uint64_t Recorded() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->recorded;
  }
  static absl::StatusOr<DelayedStream*> Cast(Stream& stream) {
    auto* s = dynamic_cast<DelayedStream*>(&stream);
    if (s == nullptr)
      return absl::InvalidArgumentError("test device: event used with another device's stream");
    return s;
  }

  absl::Duration timeout_;
  bool timing_;
  std::shared_ptr<EventState> state_;  // shared with the operations still queued on streams
};

std::unique_ptr<Event> NewDelayedEvent(absl::Duration timeout, bool timing) {
  return std::make_unique<DelayedEvent>(timeout, timing);
}

}  // namespace

TestDevice::TestDevice(TestDeviceOptions options)
    : options_(options),
      counter_(std::make_shared<MemoryCounter>()),
      host_functions_run_(std::make_shared<std::atomic<uint64_t>>(0)),
      host_thread_(options.serial_host_functions ? std::make_shared<HostFunctionThread>() : nullptr),
      compute_(NewStream()) {}

TestDevice::~TestDevice() = default;

std::unique_ptr<Stream> TestDevice::NewStream() {
  // Distinct, reproducible delay sequences per stream (splitmix-style spread of the seed).
  const uint64_t seed = options_.seed * 0x9E3779B97F4A7C15ull + (++next_stream_);
  return std::make_unique<DelayedStream>(seed, options_, host_functions_run_, host_thread_);
}

absl::StatusOr<Buffer> TestDevice::Allocate(size_t bytes, MemoryKind kind) {
  ZF_ASSIGN_OR_RETURN(Buffer b, AllocateHostMemory(bytes, kind));
  if (kind != MemoryKind::kDevice) return b;
  return CountedBuffer(std::move(b), counter_);
}

absl::StatusOr<std::unique_ptr<Stream>> TestDevice::CreateStream() { return NewStream(); }

absl::StatusOr<std::unique_ptr<Event>> TestDevice::CreateEvent() {
  return NewDelayedEvent(options_.wait_timeout);
}

absl::StatusOr<std::unique_ptr<Event>> TestDevice::CreateTimingEvent() {
  return NewDelayedEvent(options_.wait_timeout, /*timing=*/true);
}

MemoryStats TestDevice::memory_stats() const {
  MemoryStats s;
  s.allocated_bytes = counter_->allocated();
  s.peak_allocated_bytes = counter_->peak();
  return s;
}

}  // namespace zerofit::device
