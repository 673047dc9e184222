// The process's one emulated GPU (runtime_api.h says what emulation is): its memory, its streams and its
// sticky error. A CUDA driver is process-wide state; so is this, created on first use and never destroyed
// (stream threads may still run while static destructors do).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "tests/cuda_emulation/emulated_stream.h"
#include "tests/cuda_emulation/runtime_api.h"

struct CUstream_st : zerofit::cuda_emulation::EmulatedStream {
  using EmulatedStream::EmulatedStream;
};

namespace zerofit::cuda_emulation {

enum class MemoryKind { kDevice, kPinned };

// Device memory is handed out at tagged addresses: the allocation's host address with kDeviceTag in the top
// 16 bits, which x86-64 does not map (a non-canonical address), so host code that reads or writes device
// memory directly faults at once, as it would on a GPU. The runtime untags what it is given (copies, fills,
// frees) and kernel launches untag their arguments before the CUDA threads run (kernel_launch.h).
constexpr uintptr_t kDeviceTag = uintptr_t{0x5A5A} << 48;
constexpr uintptr_t kAddressMask = (uintptr_t{1} << 48) - 1;

inline bool IsTaggedWord(uintptr_t word) { return (word & ~kAddressMask) == kDeviceTag; }
// The host address of a (possibly tagged) pointer.
inline void* Untag(const void* p) {
  const uintptr_t u = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<void*>(IsTaggedWord(u) ? u & kAddressMask : u);
}

// How long a synchronising call waits before it gives up with an error.
constexpr std::chrono::milliseconds kSyncDeadline{600000};

class EmulatedGpu {
 public:
  static constexpr size_t kTotalBytes = size_t{80} << 30;  // what cudaMemGetInfo reports as the total

  static EmulatedGpu& Get();

  // Every runtime call starts here: cudaErrorNotPermitted inside a host function (a fault: CUDA forbids
  // it), else the sticky error, else success.
  cudaError_t Enter(const char* call);
  // Marks the calling thread as running a host function (cudaLaunchHostFunc) while it lives.
  class HostFunctionScope {
   public:
    HostFunctionScope();
    ~HostFunctionScope();
  };

  // A fault: printed to stderr, and `rc` becomes the sticky error.
  void Fault(cudaError_t rc, const std::string& why);
  cudaError_t sticky();

  cudaError_t Allocate(void** ptr, size_t bytes, MemoryKind kind);
  cudaError_t Free(void* ptr, MemoryKind kind);
  // Whether [ptr, ptr + bytes) lies in one allocation of `kind` (device pointers are tagged, pinned not).
  bool Within(const void* ptr, size_t bytes, MemoryKind kind);
  // The same for a host address (a device pointer untagged).
  bool WithinAddress(const void* address, size_t bytes, MemoryKind kind);
  bool Accessible(const void* address);  // the host address of device or pinned memory
  size_t device_bytes();

  // The stream a handle names (null and cudaStreamLegacy: the legacy stream), or null if it is not one.
  CUstream_st* Stream(cudaStream_t handle);
  cudaStream_t CreateStream();
  cudaError_t DestroyStream(cudaStream_t handle);
  // Waits for every stream to run what it has; false after kSyncDeadline.
  bool DrainAll();

 private:
  EmulatedGpu();
  void OnTaskError(cudaError_t rc);

  struct Allocation {
    size_t bytes;
    MemoryKind kind;
  };

  std::mutex mu_;
  std::map<const char*, Allocation> allocations_;
  size_t device_bytes_ = 0;
  cudaError_t sticky_ = cudaSuccess;
  // Shared with DrainAll while it waits, so that a stream destroyed meanwhile lives until then.
  std::map<cudaStream_t, std::shared_ptr<CUstream_st>> streams_;
  CUstream_st* legacy_ = nullptr;
};

// Launch's check of one (untagged) pointer argument (kernel_launch.h): "" or why a GPU could not read it.
std::string CheckKernelPointer(const void* address);

}  // namespace zerofit::cuda_emulation
