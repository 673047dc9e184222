#include "device/memory_counter.h"

namespace zerofit::device {

void MemoryCounter::Add(size_t bytes) {
  const size_t now = allocated_.fetch_add(bytes) + bytes;
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
}

void MemoryCounter::ResetPeak() {
  peak_.store(allocated_.load());
  // An Add between the two loads above may have been overwritten: raise the peak to what is allocated now.
  const size_t now = allocated_.load();
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
}

Buffer CountedBuffer(Buffer inner, std::shared_ptr<MemoryCounter> counter) {
  if (inner.empty()) return inner;
  const size_t bytes = inner.bytes();
  const MemoryKind kind = inner.kind();
  void* data = inner.data();
  counter->Add(bytes);
  // std::function needs a copyable release: the inner buffer is shared by the (single) copy that runs.
  auto owner = std::make_shared<Buffer>(std::move(inner));
  return Buffer(data, bytes, kind, [owner, counter](void*, size_t n) {
    counter->Sub(n);
    owner->Reset();
  });
}

}  // namespace zerofit::device
