// Counts the device memory a Device has handed out (allocated now and the high-water mark), for
// MemoryStats. Thread-safe; shared with the buffers it counts so they may outlive the Device.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "device/buffer.h"

namespace zerofit::device {

class MemoryCounter {
 public:
  void Add(size_t bytes);
  void Sub(size_t bytes) { allocated_.fetch_sub(bytes); }
  size_t allocated() const { return allocated_.load(); }
  // The high-water mark of allocated() since construction or the last ResetPeak().
  size_t peak() const { return peak_.load(); }
  // peak() becomes allocated() now (at least; an Add racing with it may raise it further).
  void ResetPeak();

 private:
  std::atomic<size_t> allocated_{0};
  std::atomic<size_t> peak_{0};
};

// Wraps `inner` so that its bytes count in `counter` until it is released.
Buffer CountedBuffer(Buffer inner, std::shared_ptr<MemoryCounter> counter);

}  // namespace zerofit::device
