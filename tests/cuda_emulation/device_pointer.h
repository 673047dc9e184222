// Device pointers of the emulated GPU (runtime_api.h): the allocation's host address with kDeviceTag in the
// top 16 bits, which x86-64 does not map (a non-canonical address), so host code that reads or writes device
// memory directly faults at once, as it would on a GPU. The runtime untags what it is given (copies, fills,
// frees) and kernel launches untag their arguments before the CUDA threads run (kernel_launch.h).
#pragma once

#include <cstdint>

namespace zerofit::cuda_emulation {

constexpr uintptr_t kDeviceTag = uintptr_t{0x5A5A} << 48;
constexpr uintptr_t kAddressMask = (uintptr_t{1} << 48) - 1;

inline bool IsTaggedWord(uintptr_t word) { return (word & ~kAddressMask) == kDeviceTag; }

// The host address a (possibly tagged) word holds; `word` unchanged when it is not a device pointer.
inline uintptr_t UntagWord(uintptr_t word) { return IsTaggedWord(word) ? word & kAddressMask : word; }

inline void* Tag(void* host_address) {
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(host_address) | kDeviceTag);
}

inline void* Untag(const void* p) {
  return reinterpret_cast<void*>(UntagWord(reinterpret_cast<uintptr_t>(p)));
}

}  // namespace zerofit::cuda_emulation
