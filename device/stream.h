// device::Stream: an ordered queue of device work (its markers, device::Event, are in event.h).
//
// Semantics follow CUDA's: operations enqueued on one stream run in order, asynchronously to the host and
// to other streams. Nothing here synchronises the host except Synchronize() (and an event's).
//
// Pointers passed to an operation must stay valid, and their memory untouched by the host, until the
// operation has run (Synchronize, or an event recorded after it completes). Counts are ELEMENTS, sizes BYTES.
//
// Errors: an operation that cannot be enqueued returns its error; an operation that fails while running
// (a failed host function, a wait that passed its deadline, a CUDA fault) breaks the stream, and
// Synchronize() and status() report that first error.
//
// Thread-safety: one thread enqueues on a stream at a time (the engine's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/dtype.h"
#include "device/event.h"
#include "device/kernels.h"

namespace zerofit::device {

class Stream {
 public:
  virtual ~Stream() = default;

  // Copies `bytes` bytes between any memory of this device (host, pinned or device).
  virtual absl::Status Copy(void* dst, const void* src, size_t bytes) = 0;
  virtual absl::Status Fill(void* dst, uint8_t value, size_t bytes) = 0;
  // acc[i] += scale * src[i] for n elements (src: fp32, bf16 or fp16; acc: fp32).
  virtual absl::Status Accumulate(const void* src, core::DType src_type, float* acc, size_t n,
                                  float scale) = 0;
  // *out (one double in device memory) = sum of src[i]^2, each element (fp32, bf16 or fp16) widened exactly
  // to fp32 as it is read: a bf16 shard gives the bits its fp32 conversion would.
  virtual absl::Status SumOfSquares(const void* src, core::DType dtype, size_t n, double* out) = 0;
  virtual absl::Status Convert(const void* src, core::DType src_type, void* dst, core::DType dst_type,
                               size_t n) = 0;
  virtual absl::Status AdamW(const AdamWArgs& args) = 0;
  virtual absl::Status AdamW8bit(const AdamW8bitArgs& args) = 0;
  // Runs `fn` on a host thread in stream order (cudaLaunchHostFunc): it must not call into the device
  // runtime; a non-OK result breaks the stream.
  virtual absl::Status HostFunc(std::function<absl::Status()> fn) = 0;

  // A new event of this stream's device (to mark this stream, or any stream of the same device).
  virtual absl::StatusOr<std::unique_ptr<Event>> CreateEvent() = 0;
  // Blocks the host until everything enqueued so far has run; returns the stream's first error.
  virtual absl::Status Synchronize(absl::Duration timeout) = 0;
  // The stream's first error, without waiting.
  virtual absl::Status status() = 0;
  // cudaStream_t on CUDA, nullptr elsewhere.
  virtual void* native_handle() const { return nullptr; }
};

}  // namespace zerofit::device
