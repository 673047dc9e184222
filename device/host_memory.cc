// Host allocations for every device: pageable (aligned), pinned (cudaHostAlloc when a CUDA device is
// visible, else 2 MiB-aligned memory locked with mlock; a refused mlock leaves it pageable and says why).
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "device/device.h"
#ifdef ZEROFIT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace zerofit::device {
namespace {

constexpr size_t kPageableAlignment = 64;
constexpr size_t kPinnedAlignment = 2u << 20;  // huge-page friendly

absl::StatusOr<void*> AlignedAlloc(size_t bytes, size_t alignment) {
  void* p = nullptr;
  const int rc = posix_memalign(&p, alignment, bytes);
  if (rc != 0 || p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("allocating ", bytes, " bytes of host memory failed: ", std::strerror(rc)));
  }
  std::memset(p, 0, bytes);  // also faults every page in before locking
  return p;
}

#ifdef ZEROFIT_HAVE_CUDA
// cudaHostAlloc when a device is visible; nullptr (and why in *note) otherwise.
void* CudaHostAlloc(size_t bytes, std::string* note) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();  // clear the "no device" error
    *note = "no CUDA device visible; ";
    return nullptr;
  }
  void* p = nullptr;
  const cudaError_t rc = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
  if (rc != cudaSuccess) {
    *note = absl::StrCat("cudaHostAlloc(", bytes, ") failed: ", cudaGetErrorString(rc), "; ");
    return nullptr;
  }
  std::memset(p, 0, bytes);
  return p;
}
#endif

absl::StatusOr<Buffer> AllocatePinned(size_t bytes) {
  std::string note;
#ifdef ZEROFIT_HAVE_CUDA
  if (void* p = CudaHostAlloc(bytes, &note)) {
    return Buffer(p, bytes, MemoryKind::kPinned, [](void* d, size_t) { cudaFreeHost(d); });
  }
#endif
  const size_t mapped = (bytes + kPinnedAlignment - 1) / kPinnedAlignment * kPinnedAlignment;
  auto p = AlignedAlloc(mapped, kPinnedAlignment);
  if (!p.ok()) return p.status();
  if (mlock(*p, mapped) == 0) {
    return Buffer(*p, bytes, MemoryKind::kPinned, [mapped](void* d, size_t) {
      munlock(d, mapped);
      std::free(d);
    });
  }
  const int err = errno;
  return Buffer(
      *p, bytes, MemoryKind::kPinned, [](void* d, size_t) { std::free(d); },
      absl::ResourceExhaustedError(absl::StrCat(
          note, "mlock(", mapped, " bytes) failed: ", std::strerror(err),
          " (raise `ulimit -l` / RLIMIT_MEMLOCK or grant CAP_IPC_LOCK); continuing with pageable "
          "memory")));
}

}  // namespace

absl::StatusOr<Buffer> AllocateHostMemory(size_t bytes, MemoryKind kind) {
  if (bytes == 0) return Buffer();
  if (kind == MemoryKind::kPinned) return AllocatePinned(bytes);
  auto p = AlignedAlloc(bytes, kPageableAlignment);
  if (!p.ok()) return p.status();
  return Buffer(*p, bytes, kind, [](void* d, size_t) { std::free(d); });
}

}  // namespace zerofit::device
