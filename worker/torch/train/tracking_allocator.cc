#include "worker/torch/train/tracking_allocator.h"

#include <c10/core/CPUAllocator.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace zerofit::worker {
namespace {

constexpr size_t kAlignment = 64;   // what LibTorch's default CPU allocator guarantees
constexpr uint8_t kPriority = 255;  // SetCPUAllocator replaces an allocator of equal or lower priority

// Each block carries a header of one alignment unit in front of the data: the owner and the byte count,
// so that the context pointer equals the data pointer (LibTorch's raw_allocate requires it).
struct Header {
  TrackingAllocator* owner;
  int64_t bytes;
};
static_assert(sizeof(Header) <= kAlignment);

void DeleteBlock(void* data) {
  if (data == nullptr) return;
  char* base = static_cast<char*>(data) - kAlignment;
  const Header* header = reinterpret_cast<const Header*>(base);
  header->owner->Release(header->bytes);
  std::free(base);
}

}  // namespace

void TrackingAllocator::Add(int64_t bytes) const {
  allocations_.fetch_add(1);
  const int64_t now = live_.fetch_add(bytes) + bytes;
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
}

#ifdef ZEROFIT_ALLOCATOR_NEW_API
c10::DataPtr TrackingAllocator::allocate(size_t n) {
#else
c10::DataPtr TrackingAllocator::allocate(size_t n) const {
#endif
  // Bytes as requested are counted: the planner predicts tensor bytes, not allocator rounding.
  Add(static_cast<int64_t>(n));
  if (n == 0) return c10::DataPtr(nullptr, nullptr, &DeleteBlock, c10::Device(c10::DeviceType::CPU));
  const size_t rounded = (n + kAlignment - 1) / kAlignment * kAlignment;
  char* base = static_cast<char*>(std::aligned_alloc(kAlignment, rounded + kAlignment));
  if (base == nullptr) {
    live_.fetch_sub(static_cast<int64_t>(n));
    throw std::bad_alloc();
  }
  *reinterpret_cast<Header*>(base) = Header{const_cast<TrackingAllocator*>(this), static_cast<int64_t>(n)};
  void* data = base + kAlignment;
  return c10::DataPtr(data, data, &DeleteBlock, c10::Device(c10::DeviceType::CPU));
}

c10::DeleterFnPtr TrackingAllocator::raw_deleter() const { return &DeleteBlock; }

#ifdef ZEROFIT_ALLOCATOR_NEW_API
void TrackingAllocator::copy_data(void* dest, const void* src, size_t count) const {
  std::memcpy(dest, src, count);
}
#endif

ScopedTrackingAllocator::ScopedTrackingAllocator(TrackingAllocator* allocator)
    : previous_(c10::GetCPUAllocator()) {
  c10::SetCPUAllocator(allocator, kPriority);
}

ScopedTrackingAllocator::~ScopedTrackingAllocator() { c10::SetCPUAllocator(previous_, kPriority); }

}  // namespace zerofit::worker
