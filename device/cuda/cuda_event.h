// device::Event on a cudaEvent_t: created with cudaEventDisableTiming (cheapest to record and wait on), or
// as a timing event for MillisecondsSince (cudaEventElapsedTime).
// Record/Wait accept only CudaStreams; Synchronize polls cudaEventQuery against its deadline instead of
// cudaEventSynchronize, which could block forever behind a hung collective. Thread-safe (CUDA's event calls
// are). The destructor does not wait: CUDA defers the release until recorded work has run.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "absl/status/statusor.h"
#include "device/stream.h"

namespace zerofit::device {

class CudaEvent final : public Event {
 public:
  enum class Timing { kOff, kOn };
  static absl::StatusOr<std::unique_ptr<CudaEvent>> Create(int device, Timing timing = Timing::kOff);
  ~CudaEvent() override;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  absl::Status Record(Stream& stream) override;
  absl::Status Wait(Stream& stream) override;
  absl::Status Synchronize(absl::Duration timeout) override;
  bool Query() override;
  absl::StatusOr<double> MillisecondsSince(Event& start) override;

  cudaEvent_t get() const { return event_; }

 private:
  CudaEvent(int device, cudaEvent_t event, Timing timing) : device_(device), timing_(timing), event_(event) {}

  const int device_;
  const Timing timing_;
  cudaEvent_t event_;
};

}  // namespace zerofit::device
