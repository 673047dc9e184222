// Host memory for per-shard optimizer state and staging: pinned (offload::PinnedBuffer) when it is offloaded,
// so copies to and from the device can be DMA'd asynchronously, plain aligned memory otherwise.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "core/aligned_buffer.h"
#include "offload/pinned_buffer.h"

namespace zerofit::sharding {

class StateBuffer {
 public:
  StateBuffer() = default;
  static absl::StatusOr<StateBuffer> Allocate(size_t bytes, bool pinned) {
    StateBuffer b;
    if (pinned) {
      auto p = offload::PinnedBuffer::Allocate(bytes);
      if (!p.ok()) return p.status();
      b.pinned_ = std::move(*p);
    } else {
      auto a = core::AlignedBuffer::Allocate(bytes);
      if (!a.ok()) return a.status();
      b.aligned_ = std::move(*a);
    }
    return b;
  }

  void* data() { return pinned_.data() != nullptr ? pinned_.data() : aligned_.data(); }
  const void* data() const { return pinned_.data() != nullptr ? pinned_.data() : aligned_.data(); }
  template <typename T>
  T* as() {
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data());
  }
  size_t bytes() const { return pinned_.data() != nullptr ? pinned_.bytes() : aligned_.bytes(); }
  // Bytes actually page-locked (0 for plain memory or when mlock was refused).
  size_t pinned_bytes() const { return pinned_.pinned() ? pinned_.bytes() : 0; }
  const offload::PinnedBuffer& pinned_buffer() const { return pinned_; }
  void Zero() {
    pinned_.Zero();
    aligned_.Zero();
  }

 private:
  core::AlignedBuffer aligned_;
  offload::PinnedBuffer pinned_;
};

}  // namespace zerofit::sharding
