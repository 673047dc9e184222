#include "offload/pinned_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#ifdef ZEROFIT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace zerofit::offload {

const char* PinnedKindName(PinnedBuffer::Kind kind) {
  switch (kind) {
    case PinnedBuffer::Kind::kNone:
      return "none";
    case PinnedBuffer::Kind::kCudaHost:
      return "cudaHostAlloc";
    case PinnedBuffer::Kind::kMlocked:
      return "mlock";
    case PinnedBuffer::Kind::kPageable:
      return "pageable";
  }
  return "unknown";
}

absl::StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  PinnedBuffer b;
  if (bytes == 0) return b;
  std::string cuda_note;
#ifdef ZEROFIT_HAVE_CUDA
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    void* p = nullptr;
    const cudaError_t rc = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (rc == cudaSuccess) {
      std::memset(p, 0, bytes);
      b.data_ = p;
      b.bytes_ = bytes;
      b.kind_ = Kind::kCudaHost;
      return b;
    }
    cuda_note = absl::StrCat("cudaHostAlloc(", bytes, ") failed: ", cudaGetErrorString(rc), "; ");
  } else {
    cudaGetLastError();  // clear the "no device" error
    cuda_note = "no CUDA device visible; ";
  }
#endif
  const size_t mapped = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = nullptr;
  const int rc = posix_memalign(&p, kAlignment, mapped);
  if (rc != 0 || p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("PinnedBuffer: allocating ", bytes,
                                                     " bytes of host memory failed: ", std::strerror(rc)));
  }
  std::memset(p, 0, mapped);  // also faults every page in before locking
  b.data_ = p;
  b.bytes_ = bytes;
  b.mapped_bytes_ = mapped;
  if (mlock(p, mapped) == 0) {
    b.kind_ = Kind::kMlocked;
  } else {
    const int err = errno;
    b.kind_ = Kind::kPageable;
    b.pin_status_ = absl::ResourceExhaustedError(absl::StrCat(
        cuda_note, "mlock(", mapped, " bytes) failed: ", std::strerror(err),
        " (raise `ulimit -l` / RLIMIT_MEMLOCK or grant CAP_IPC_LOCK); continuing with pageable memory"));
  }
  return b;
}

void PinnedBuffer::Release() {
  if (data_ == nullptr) return;
  switch (kind_) {
#ifdef ZEROFIT_HAVE_CUDA
    case Kind::kCudaHost:
      cudaFreeHost(data_);
      break;
#endif
    case Kind::kMlocked:
      munlock(data_, mapped_bytes_);
      std::free(data_);
      break;
    default:
      std::free(data_);
      break;
  }
  data_ = nullptr;
  bytes_ = mapped_bytes_ = 0;
  kind_ = Kind::kNone;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      mapped_bytes_(std::exchange(o.mapped_bytes_, 0)),
      kind_(std::exchange(o.kind_, Kind::kNone)),
      pin_status_(std::move(o.pin_status_)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    Release();
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    mapped_bytes_ = std::exchange(o.mapped_bytes_, 0);
    kind_ = std::exchange(o.kind_, Kind::kNone);
    pin_status_ = std::move(o.pin_status_);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() { Release(); }

void PinnedBuffer::Zero() {
  if (data_ != nullptr) std::memset(data_, 0, bytes_);
}

}  // namespace zerofit::offload
