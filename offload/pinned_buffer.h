// Page-locked ("pinned") host memory for offloaded optimizer state and the staging buffers that cross the
// bus.
//
// With CUDA (built and a device present) the memory comes from cudaHostAlloc, so device copies run at full
// DMA speed and asynchronously. Otherwise it is 2 MiB-aligned memory (huge-page friendly) locked with mlock;
// if mlock fails (RLIMIT_MEMLOCK, no CAP_IPC_LOCK) the buffer still works, unpinned, and pin_status() says
// why: that is reported, not fatal. Move-only RAII; contents are zeroed at allocation.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zerofit::offload {

class PinnedBuffer {
 public:
  enum class Kind { kNone, kCudaHost, kMlocked, kPageable };

  PinnedBuffer() = default;
  static absl::StatusOr<PinnedBuffer> Allocate(size_t bytes);
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

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
  size_t bytes() const { return bytes_; }
  Kind kind() const { return kind_; }
  bool pinned() const { return kind_ == Kind::kCudaHost || kind_ == Kind::kMlocked; }
  // OK when pinned; otherwise why pinning was not possible.
  const absl::Status& pin_status() const { return pin_status_; }
  void Zero();

  static constexpr size_t kAlignment = 2u << 20;

 private:
  void Release();

  void* data_ = nullptr;
  size_t bytes_ = 0;
  size_t mapped_bytes_ = 0;
  Kind kind_ = Kind::kNone;
  absl::Status pin_status_;
};

const char* PinnedKindName(PinnedBuffer::Kind kind);

}  // namespace zerofit::offload
