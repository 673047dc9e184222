#include "tests/cuda_emulation/emulated_gpu.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

namespace zerofit::cuda_emulation {
namespace {

thread_local bool in_host_function = false;

constexpr size_t kAlignment = 256;  // cudaMalloc's guarantee

std::string Address(const void* p) {
  std::ostringstream out;
  out << p;
  return out.str();
}

}  // namespace

EmulatedGpu::HostFunctionScope::HostFunctionScope() { in_host_function = true; }
EmulatedGpu::HostFunctionScope::~HostFunctionScope() { in_host_function = false; }

EmulatedGpu& EmulatedGpu::Get() {
  static EmulatedGpu* gpu = new EmulatedGpu();  // never destroyed: see the header
  return *gpu;
}

EmulatedGpu::EmulatedGpu() {
  auto legacy = std::make_shared<CUstream_st>([this](cudaError_t rc) { OnTaskError(rc); });
  legacy_ = legacy.get();
  streams_[legacy_] = std::move(legacy);
}

cudaError_t EmulatedGpu::Enter(const char* call) {
  if (in_host_function) {
    Fault(cudaErrorNotPermitted, std::string(call) +
                                     " called from a host function (cudaLaunchHostFunc "
                                     "forbids CUDA calls there)");
    return cudaErrorNotPermitted;
  }
  return sticky();
}

void EmulatedGpu::Fault(cudaError_t rc, const std::string& why) {
  std::fprintf(stderr, "cuda emulation: fault (%s): %s\n", cudaGetErrorName(rc), why.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  if (sticky_ == cudaSuccess) sticky_ = rc;
}

void EmulatedGpu::OnTaskError(cudaError_t rc) {
  if (sticky() == cudaSuccess) Fault(rc, "a queued operation failed");  // unless the task said why itself
}

cudaError_t EmulatedGpu::sticky() {
  std::lock_guard<std::mutex> lock(mu_);
  return sticky_;
}

cudaError_t EmulatedGpu::Allocate(void** ptr, size_t bytes, MemoryKind kind) {
  if (ptr == nullptr) return cudaErrorInvalidValue;
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  std::lock_guard<std::mutex> lock(mu_);
  if (kind == MemoryKind::kDevice && device_bytes_ + bytes > kTotalBytes) return cudaErrorMemoryAllocation;
  void* p = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  if (p == nullptr) return cudaErrorMemoryAllocation;
  // cudaMalloc's memory holds whatever was there: a pattern, so that code that assumes zeros is caught.
  std::memset(p, kind == MemoryKind::kDevice ? 0xA5 : 0, bytes);
  allocations_[static_cast<const char*>(p)] = Allocation{bytes, kind};
  if (kind == MemoryKind::kDevice) device_bytes_ += bytes;
  *ptr = kind == MemoryKind::kDevice ? Tag(p) : p;
  return cudaSuccess;
}

cudaError_t EmulatedGpu::Free(void* ptr, MemoryKind kind) {
  if (ptr == nullptr) return cudaSuccess;
  if ((kind == MemoryKind::kDevice) != IsTaggedWord(reinterpret_cast<uintptr_t>(ptr)))
    return cudaErrorInvalidValue;
  ptr = Untag(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(static_cast<const char*>(ptr));
  if (it == allocations_.end() || it->second.kind != kind) return cudaErrorInvalidValue;
  if (kind == MemoryKind::kDevice) device_bytes_ -= it->second.bytes;
  allocations_.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

bool EmulatedGpu::Within(const void* ptr, size_t bytes, MemoryKind kind) {
  if ((kind == MemoryKind::kDevice) != IsTaggedWord(reinterpret_cast<uintptr_t>(ptr))) return false;
  return WithinAddress(Untag(ptr), bytes, kind);
}

bool EmulatedGpu::WithinAddress(const void* address, size_t bytes, MemoryKind kind) {
  const char* p = static_cast<const char*>(address);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.upper_bound(p);
  if (it == allocations_.begin()) return false;
  --it;
  return it->second.kind == kind && p >= it->first && p + bytes <= it->first + it->second.bytes &&
         (bytes > 0 || p < it->first + it->second.bytes);
}

bool EmulatedGpu::Accessible(const void* address) {
  return WithinAddress(address, 0, MemoryKind::kDevice) || WithinAddress(address, 0, MemoryKind::kPinned);
}

size_t EmulatedGpu::device_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return device_bytes_;
}

CUstream_st* EmulatedGpu::Stream(cudaStream_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (handle == nullptr || handle == cudaStreamLegacy) return legacy_;
  auto it = streams_.find(handle);
  return it != streams_.end() ? it->second.get() : nullptr;
}

cudaStream_t EmulatedGpu::CreateStream() {
  auto s = std::make_shared<CUstream_st>([this](cudaError_t rc) { OnTaskError(rc); });
  std::lock_guard<std::mutex> lock(mu_);
  streams_[s.get()] = s;
  return s.get();
}

cudaError_t EmulatedGpu::DestroyStream(cudaStream_t handle) {
  std::shared_ptr<CUstream_st> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = streams_.find(handle);
    if (handle == cudaStreamLegacy || it == streams_.end() || it->second.get() == legacy_) {
      return cudaErrorInvalidResourceHandle;
    }
    stream = std::move(it->second);
    streams_.erase(it);
  }
  // CUDA returns at once and frees the stream when its work is done; here the last owner's destructor runs
  // that work first (a stream's task never waits for its own destruction, so this ends).
  stream.reset();
  return cudaSuccess;
}

bool EmulatedGpu::DrainAll() {
  std::vector<std::shared_ptr<CUstream_st>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& entry : streams_) streams.push_back(entry.second);
  }
  for (const std::shared_ptr<CUstream_st>& s : streams) {
    if (!s->Drain(kSyncDeadline)) return false;
  }
  return true;
}

std::string CheckKernelPointer(const void* address) {
  if (address == nullptr || EmulatedGpu::Get().Accessible(address)) return "";
  return "kernel argument " + Address(address) +
         " is neither device memory nor pinned host memory (a GPU cannot read pageable host memory)";
}

}  // namespace zerofit::cuda_emulation
