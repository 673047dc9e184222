// device::Buffer: the one owning memory type of the engine (flat parameters, gradients, optimizer state,
// staging). Three kinds: pageable host memory, pinned (page-locked) host memory that device copies can DMA
// asynchronously, and device memory. A Device allocates it (device.h) and says how it is freed; the Buffer
// only owns it. Move-only RAII; contents are zeroed at allocation.
//
// On the host and test devices "device" memory is host memory too (the engine must still reach it only
// through stream operations, which is what the test device checks); on CUDA it is cudaMalloc'ed.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>

#include "absl/status/status.h"

namespace zerofit::device {

enum class MemoryKind { kPageable, kPinned, kDevice };
const char* MemoryKindName(MemoryKind kind);

class Buffer {
 public:
  using Release = std::function<void(void* data, size_t bytes)>;

  Buffer() = default;
  // Takes ownership of `data` (`bytes` bytes); `release` frees it. `pin_status` says why memory that was
  // asked to be pinned is not (OK otherwise).
  Buffer(void* data, size_t bytes, MemoryKind kind, Release release, absl::Status pin_status = {})
      : data_(data),
        bytes_(bytes),
        kind_(kind),
        release_(std::move(release)),
        pin_status_(std::move(pin_status)) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Reset(); }

  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T>
  T* as() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data_);
  }
  // Pointer `bytes` bytes into the buffer (no bounds check: offsets come from the bucket plan).
  char* at(size_t byte_offset) { return static_cast<char*>(data_) + byte_offset; }
  const char* at(size_t byte_offset) const { return static_cast<const char*>(data_) + byte_offset; }
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }
  MemoryKind kind() const { return kind_; }
  // OK unless pinned memory was asked for and the pages could not be locked (the buffer still works).
  const absl::Status& pin_status() const { return pin_status_; }
  // Bytes actually page-locked.
  size_t pinned_bytes() const { return kind_ == MemoryKind::kPinned && pin_status_.ok() ? bytes_ : 0; }
  void Reset();

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  MemoryKind kind_ = MemoryKind::kPageable;
  Release release_;
  absl::Status pin_status_;
};

}  // namespace zerofit::device
