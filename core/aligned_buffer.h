// Owning, aligned, zero-initialised host memory for flat parameter / gradient / optimizer buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace zerofit::core {

// Move-only RAII owner of `bytes` bytes aligned to `alignment` (a power of two >= sizeof(void*)).
// Memory is zeroed at allocation. Not thread-safe; the contents are the caller's business.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  static absl::StatusOr<AlignedBuffer> Allocate(size_t bytes, size_t alignment = 64);

  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

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
  // Capacity in bytes, as requested.
  size_t bytes() const { return bytes_; }
  void Zero();

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace zerofit::core
