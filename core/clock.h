// Time as a dependency: production code asks a Clock, tests drive a FakeClock (STYLE 11).
#pragma once

#include <mutex>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace zerofit::core {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

// Starts at the Unix epoch + 1e9 s; moves only when told. Thread-safe.
class FakeClock final : public Clock {
 public:
  absl::Time Now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }

 private:
  mutable std::mutex mu_;
  absl::Time now_ = absl::FromUnixSeconds(1000000000);
};

}  // namespace zerofit::core
