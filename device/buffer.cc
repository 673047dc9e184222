#include "device/buffer.h"

namespace zerofit::device {

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kPageable:
      return "pageable";
    case MemoryKind::kPinned:
      return "pinned";
    case MemoryKind::kDevice:
      return "device";
  }
  return "unknown";
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = other.kind_;
    release_ = std::move(other.release_);
    other.release_ = nullptr;
    pin_status_ = std::move(other.pin_status_);
  }
  return *this;
}

void Buffer::Reset() {
  if (data_ != nullptr && release_) release_(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
  release_ = nullptr;
  pin_status_ = absl::OkStatus();
}

}  // namespace zerofit::device
