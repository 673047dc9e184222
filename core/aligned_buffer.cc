#include "core/aligned_buffer.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zerofit::core {

absl::StatusOr<AlignedBuffer> AlignedBuffer::Allocate(size_t bytes, size_t alignment) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("AlignedBuffer: alignment ", alignment, " is not a power of two >= ", sizeof(void*)));
  }
  AlignedBuffer buffer;
  if (bytes == 0) return buffer;
  void* p = nullptr;
  const int rc = posix_memalign(&p, alignment, bytes);
  if (rc != 0 || p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("AlignedBuffer: posix_memalign(", bytes,
                                                     " bytes, align ", alignment,
                                                     ") failed: ", std::strerror(rc)));
  }
  std::memset(p, 0, bytes);
  buffer.data_ = p;
  buffer.bytes_ = bytes;
  return buffer;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

void AlignedBuffer::Zero() {
  if (data_ != nullptr) std::memset(data_, 0, bytes_);
}

}  // namespace zerofit::core
