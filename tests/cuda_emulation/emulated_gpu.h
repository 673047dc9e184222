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

#include "tests/cuda_emulation/device_pointer.h"
#include "tests/cuda_emulation/emulated_stream.h"
#include "tests/cuda_emulation/runtime_api.h"

struct CUstream_st : zerofit::cuda_emulation::EmulatedStream {
  using EmulatedStream::EmulatedStream;
};

namespace zerofit::cuda_emulation {

enum class MemoryKind { kDevice, kPinned };

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
