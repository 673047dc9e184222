// Kernel launches for emulated CUDA (runtime_api.h says what emulation is). cmake/emulate_cuda_source.cmake
// rewrites a .cu file into C++ that this header makes compile:
//   Kernel<<<grid, block, shared, stream>>>(args)  ->  Kernel * LaunchConfig{grid, block, shared,
//   stream}(args)
//   __shared__ T name[N];                          ->  auto& name = Shared<T[N]>([] {});
// A launch copies its arguments (as CUDA does) and enqueues the grid on its stream. The grid runs one host
// thread per CUDA thread of a block; each walks every block of the grid in one shuffled order, so threads of
// different blocks run at once and in no fixed order, as on a GPU. Each block has its own barrier
// (__syncthreads), warps (__shfl_xor_sync) and shared memory, created when a thread first needs them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/cuda_emulation/device_functions.h"
#include "tests/cuda_emulation/device_pointer.h"
#include "tests/cuda_emulation/runtime_api.h"

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

// CUDA's built-in variables, per host thread: the launch sets them for the CUDA thread that thread runs.
inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;

#define __syncthreads() ::zerofit::cuda_emulation::SyncThreads(__LINE__)
#define __shfl_xor_sync(mask, value, lane_mask) \
  ::zerofit::cuda_emulation::ShuffleXor((mask), (value), (lane_mask), __LINE__)

namespace zerofit::cuda_emulation {

// Waits until every thread of the block has reached a __syncthreads; `line` names it in a fault.
void SyncThreads(int line);

// The calling block's shared array for `key` (one per declaration and kernel), `bytes` long.
void* SharedArray(const void* key, size_t bytes);

template <typename T, typename Site>
T& Shared(Site) {
  static const char key = 0;  // one per T and declaration site (each lambda has a type of its own)
  return *static_cast<T*>(SharedArray(&key, sizeof(T)));
}

// `bits` of the lane whose index is this lane's XOR lane_mask; every lane of the warp must call it.
uint64_t ShuffleXorBits(unsigned mask, uint64_t bits, int lane_mask, int line);

template <typename T>
T ShuffleXor(unsigned mask, T value, int lane_mask, int line) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t), "a register-sized value");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = ShuffleXorBits(mask, bits, lane_mask, line);
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

// Enqueues `body` (one CUDA thread's run of the kernel) as a grid on `stream`, or records why the launch
// is refused as the calling thread's last error. `pointers`: the kernel's pointer arguments, each of which
// must be null, device memory or pinned host memory.
void Launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
            std::vector<const void*> pointers, std::function<void()> body);

template <typename... A>
struct PendingLaunch {
  dim3 grid, block;
  size_t shared_bytes;
  cudaStream_t stream;
  std::tuple<A...> args;
};

struct LaunchConfig {
  dim3 grid;
  dim3 block;
  size_t shared_bytes = 0;
  cudaStream_t stream = nullptr;

  template <typename... A>
  PendingLaunch<std::decay_t<A>...> operator()(A&&... args) const {
    return {grid, block, shared_bytes, stream, std::tuple<std::decay_t<A>...>(std::forward<A>(args)...)};
  }
};

// Untags a kernel argument (device_pointer.h: kernels get host addresses): a pointer, or the pointer-sized
// words of a struct (as AdamW8bitState's, whose members are pointers: a word is untagged only when its top 16
// bits are the tag, which no count, size or pair of floats that zerofit's kernels take has). Adds each
// pointer to `pointers`, for Launch's check.
template <typename T>
void PrepareArgument(T& value, std::vector<const void*>* pointers) {
  if constexpr (std::is_pointer_v<T>) {
    value = reinterpret_cast<T>(UntagWord(reinterpret_cast<uintptr_t>(value)));
    pointers->push_back(reinterpret_cast<const void*>(value));
  } else if constexpr (std::is_class_v<T> && std::is_trivially_copyable_v<T>) {
    auto* bytes = reinterpret_cast<unsigned char*>(&value);
    for (size_t at = 0; at + sizeof(uintptr_t) <= sizeof(T); at += alignof(uintptr_t)) {
      uintptr_t word;
      std::memcpy(&word, bytes + at, sizeof word);
      const uintptr_t untagged = UntagWord(word);
      if (untagged == word) continue;
      std::memcpy(bytes + at, &untagged, sizeof word);
      pointers->push_back(reinterpret_cast<const void*>(untagged));
    }
  }
}

template <typename... P, typename... A>
void operator*(void (*kernel)(P...), PendingLaunch<A...>&& launch) {
  std::vector<const void*> pointers;
  std::apply([&pointers](auto&... a) { (PrepareArgument(a, &pointers), ...); }, launch.args);
  Launch(launch.grid, launch.block, launch.shared_bytes, launch.stream, std::move(pointers),
         [kernel, args = std::move(launch.args)] {
           std::apply([kernel](const auto&... a) { kernel(a...); }, args);
         });
}

// Runs a grid on the calling thread's behalf (the stream's worker) and returns the first fault, or "".
std::string RunGrid(dim3 grid, dim3 block, const std::function<void()>& body);

}  // namespace zerofit::cuda_emulation
