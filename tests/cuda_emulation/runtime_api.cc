// The emulated CUDA runtime API (runtime_api.h): each call checks what CUDA would refuse, then acts on the
// one EmulatedGpu. Failing calls set the calling thread's last error, as CUDA's do.
#include "tests/cuda_emulation/runtime_api.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "tests/cuda_emulation/emulated_gpu.h"
#include "tests/cuda_emulation/kernel_launch.h"

using zerofit::cuda_emulation::EmulatedGpu;
using zerofit::cuda_emulation::MemoryKind;
using zerofit::cuda_emulation::Untag;

namespace {

thread_local cudaError_t last_error = cudaSuccess;

constexpr std::chrono::milliseconds kEventWaitDeadline{60000};

cudaError_t Result(cudaError_t rc) {
  if (rc != cudaSuccess) last_error = rc;
  return rc;
}

EmulatedGpu& Gpu() { return EmulatedGpu::Get(); }

// Enter's result for `call`, or the stream `handle` names (null: an invalid handle, already reported).
CUstream_st* EnterWithStream(const char* call, cudaStream_t handle, cudaError_t* rc) {
  *rc = Gpu().Enter(call);
  if (*rc != cudaSuccess) return nullptr;
  CUstream_st* s = Gpu().Stream(handle);
  if (s == nullptr) *rc = cudaErrorInvalidResourceHandle;
  return s;
}

}  // namespace

// An event: how many records were asked for and how many have run, and when the last one ran.
struct EventState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;
  uint64_t completed = 0;
  std::chrono::steady_clock::time_point at;
};

struct CUevent_st {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
  bool timing = true;
};

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return Result(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (cudaError_t rc = Gpu().Enter("cudaSetDevice"); rc != cudaSuccess) return Result(rc);
  return Result(device == 0 ? cudaSuccess : cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return Result(cudaErrorInvalidValue);
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr || attr != cudaDevAttrMemoryPoolsSupported) return Result(cudaErrorInvalidValue);
  if (device != 0) return Result(cudaErrorInvalidDevice);
  *value = 1;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (cudaError_t rc = Gpu().Enter("cudaDeviceSynchronize"); rc != cudaSuccess) return Result(rc);
  if (!Gpu().DrainAll()) return Result(cudaErrorLaunchFailure);
  return Result(Gpu().sticky());
}

cudaError_t cudaGetLastError() {
  const cudaError_t rc = last_error;
  last_error = cudaSuccess;
  return rc != cudaSuccess ? rc : Gpu().sticky();
}

cudaError_t cudaPeekAtLastError() { return last_error != cudaSuccess ? last_error : Gpu().sticky(); }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNotPermitted:
      return "cudaErrorNotPermitted";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorMemoryAllocation:
      return "out of memory (emulated GPU)";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure (emulated GPU: the fault is on stderr)";
    default:
      return "error (emulated GPU)";
  }
}

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (cudaError_t rc = Gpu().Enter("cudaMalloc"); rc != cudaSuccess) return Result(rc);
  return Result(Gpu().Allocate(ptr, bytes, MemoryKind::kDevice));
}

cudaError_t cudaFree(void* ptr) {
  if (cudaError_t rc = Gpu().Enter("cudaFree"); rc != cudaSuccess) return Result(rc);
  // cudaFree synchronises the device: no queued work still uses the memory.
  if (ptr != nullptr && !Gpu().DrainAll()) return Result(cudaErrorLaunchFailure);
  return Result(Gpu().Free(ptr, MemoryKind::kDevice));
}

cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  cudaError_t rc;
  if (EnterWithStream("cudaMallocAsync", stream, &rc) == nullptr) return Result(rc);
  return Result(Gpu().Allocate(ptr, bytes, MemoryKind::kDevice));
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  cudaError_t rc;
  CUstream_st* s = EnterWithStream("cudaFreeAsync", stream, &rc);
  if (s == nullptr) return Result(rc);
  if (ptr != nullptr && !Gpu().Within(ptr, 1, MemoryKind::kDevice)) return Result(cudaErrorInvalidValue);
  s->Enqueue([ptr] { return Gpu().Free(ptr, MemoryKind::kDevice); });
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  if (cudaError_t rc = Gpu().Enter("cudaHostAlloc"); rc != cudaSuccess) return Result(rc);
  if ((flags & ~unsigned{cudaHostAllocPortable}) != 0) return Result(cudaErrorNotSupported);
  return Result(Gpu().Allocate(ptr, bytes, MemoryKind::kPinned));
}

cudaError_t cudaFreeHost(void* ptr) {
  if (cudaError_t rc = Gpu().Enter("cudaFreeHost"); rc != cudaSuccess) return Result(rc);
  if (ptr != nullptr && !Gpu().DrainAll()) return Result(cudaErrorLaunchFailure);
  return Result(Gpu().Free(ptr, MemoryKind::kPinned));
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (cudaError_t rc = Gpu().Enter("cudaMemGetInfo"); rc != cudaSuccess) return Result(rc);
  if (free_bytes == nullptr || total_bytes == nullptr) return Result(cudaErrorInvalidValue);
  *total_bytes = EmulatedGpu::kTotalBytes;
  *free_bytes = EmulatedGpu::kTotalBytes - Gpu().device_bytes();
  return cudaSuccess;
}

namespace {

// A copy's side: device memory must hold all of it; host memory (pinned or not) is the caller's to size.
bool CopyRangeOk(const void* p, size_t bytes) {
  const bool starts_in_device = Gpu().Within(p, 0, MemoryKind::kDevice);
  return !starts_in_device || Gpu().Within(p, bytes, MemoryKind::kDevice);
}

}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  cudaError_t rc;
  CUstream_st* s = EnterWithStream("cudaMemcpyAsync", stream, &rc);
  if (s == nullptr) return Result(rc);
  if (kind != cudaMemcpyDefault) return Result(cudaErrorNotSupported);  // zerofit copies by UVA only
  if (bytes == 0) return cudaSuccess;
  if (dst == nullptr || src == nullptr || !CopyRangeOk(dst, bytes) || !CopyRangeOk(src, bytes)) {
    return Result(cudaErrorInvalidValue);
  }
  s->Enqueue([dst = Untag(dst), src = Untag(src), bytes] {
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  });
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (cudaError_t rc = cudaMemcpyAsync(dst, src, bytes, kind, cudaStreamLegacy); rc != cudaSuccess) return rc;
  return cudaStreamSynchronize(cudaStreamLegacy);
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  cudaError_t rc;
  CUstream_st* s = EnterWithStream("cudaMemsetAsync", stream, &rc);
  if (s == nullptr) return Result(rc);
  if (bytes == 0) return cudaSuccess;
  if (!Gpu().Within(dst, bytes, MemoryKind::kDevice) && !Gpu().Within(dst, bytes, MemoryKind::kPinned)) {
    return Result(cudaErrorInvalidValue);
  }
  s->Enqueue([dst = Untag(dst), value, bytes] {
    std::memset(dst, value, bytes);
    return cudaSuccess;
  });
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (cudaError_t rc = Gpu().Enter("cudaStreamCreateWithFlags"); rc != cudaSuccess) return Result(rc);
  if (stream == nullptr) return Result(cudaErrorInvalidValue);
  // A blocking stream synchronises implicitly with the legacy stream; that is not emulated (runtime_api.h).
  if (flags != cudaStreamNonBlocking) return Result(cudaErrorNotSupported);
  *stream = Gpu().CreateStream();
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (cudaError_t rc = Gpu().Enter("cudaStreamDestroy"); rc != cudaSuccess) return Result(rc);
  return Result(Gpu().DestroyStream(stream));
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  cudaError_t rc;
  CUstream_st* s = EnterWithStream("cudaStreamQuery", stream, &rc);
  if (s == nullptr) return Result(rc);
  return s->Idle() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  cudaError_t rc;
  CUstream_st* s = EnterWithStream("cudaStreamSynchronize", stream, &rc);
  if (s == nullptr) return Result(rc);
  if (!s->Drain(zerofit::cuda_emulation::kSyncDeadline)) return Result(cudaErrorLaunchFailure);
  return Result(Gpu().sticky());
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  cudaError_t rc;
  CUstream_st* s = EnterWithStream("cudaStreamWaitEvent", stream, &rc);
  if (s == nullptr) return Result(rc);
  if (event == nullptr || flags != 0) return Result(cudaErrorInvalidValue);
  std::shared_ptr<EventState> state = event->state;
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    target = state->recorded;  // the latest record at the time of the call, as CUDA
  }
  if (target == 0) return cudaSuccess;  // never recorded: nothing to wait for
  s->Enqueue([state, target] {
    std::unique_lock<std::mutex> lock(state->mu);
    if (state->cv.wait_for(lock, kEventWaitDeadline, [&] { return state->completed >= target; })) {
      return cudaSuccess;
    }
    Gpu().Fault(cudaErrorLaunchFailure, "a stream waited 60 s for an event that its stream never reached");
    return cudaErrorLaunchFailure;
  });
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  cudaError_t rc;
  CUstream_st* s = EnterWithStream("cudaLaunchHostFunc", stream, &rc);
  if (s == nullptr) return Result(rc);
  if (fn == nullptr) return Result(cudaErrorInvalidValue);
  s->Enqueue([fn, user_data] {
    EmulatedGpu::HostFunctionScope scope;
    fn(user_data);
    return cudaSuccess;
  });
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (cudaError_t rc = Gpu().Enter("cudaEventCreateWithFlags"); rc != cudaSuccess) return Result(rc);
  if (event == nullptr || (flags & ~unsigned{cudaEventDisableTiming}) != 0)
    return Result(cudaErrorInvalidValue);
  *event = new CUevent_st;
  (*event)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (cudaError_t rc = Gpu().Enter("cudaEventDestroy"); rc != cudaSuccess) return Result(rc);
  if (event == nullptr) return Result(cudaErrorInvalidResourceHandle);
  delete event;  // queued records and waits hold the state
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  cudaError_t rc;
  CUstream_st* s = EnterWithStream("cudaEventRecord", stream, &rc);
  if (s == nullptr) return Result(rc);
  if (event == nullptr) return Result(cudaErrorInvalidResourceHandle);
  std::shared_ptr<EventState> state = event->state;
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    target = ++state->recorded;
  }
  s->Enqueue([state, target] {
    std::lock_guard<std::mutex> lock(state->mu);
    if (target > state->completed) {
      state->completed = target;
      state->at = std::chrono::steady_clock::now();
    }
    state->cv.notify_all();
    return cudaSuccess;
  });
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (cudaError_t rc = Gpu().Enter("cudaEventQuery"); rc != cudaSuccess) return Result(rc);
  if (event == nullptr) return Result(cudaErrorInvalidResourceHandle);
  std::lock_guard<std::mutex> lock(event->state->mu);
  return event->state->completed >= event->state->recorded ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (cudaError_t rc = Gpu().Enter("cudaEventSynchronize"); rc != cudaSuccess) return Result(rc);
  if (event == nullptr) return Result(cudaErrorInvalidResourceHandle);
  EventState& state = *event->state;
  std::unique_lock<std::mutex> lock(state.mu);
  if (!state.cv.wait_for(lock, zerofit::cuda_emulation::kSyncDeadline,
                         [&] { return state.completed >= state.recorded; })) {
    return Result(cudaErrorLaunchFailure);
  }
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (cudaError_t rc = Gpu().Enter("cudaEventElapsedTime"); rc != cudaSuccess) return Result(rc);
  if (ms == nullptr || start == nullptr || end == nullptr) return Result(cudaErrorInvalidValue);
  if (!start->timing || !end->timing) return Result(cudaErrorInvalidResourceHandle);
  std::chrono::steady_clock::time_point times[2];
  cudaEvent_t events[2] = {start, end};
  for (int i = 0; i < 2; ++i) {
    std::lock_guard<std::mutex> lock(events[i]->state->mu);
    if (events[i]->state->recorded == 0) return Result(cudaErrorInvalidResourceHandle);
    if (events[i]->state->completed < events[i]->state->recorded) return Result(cudaErrorNotReady);
    times[i] = events[i]->state->at;
  }
  *ms = std::chrono::duration<float, std::milli>(times[1] - times[0]).count();
  return cudaSuccess;
}

namespace zerofit::cuda_emulation {

void Launch(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
            std::vector<const void*> pointers, std::function<void()> body) {
  cudaError_t rc;
  CUstream_st* s = EnterWithStream("a kernel launch", stream, &rc);
  if (s == nullptr) {
    Result(rc);
    return;
  }
  const size_t threads = size_t{block.x} * block.y * block.z;
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
      grid.z > 65535 || shared_bytes > 48 * 1024) {
    Result(cudaErrorInvalidConfiguration);
    return;
  }
  for (const void* p : pointers) {
    if (std::string why = CheckKernelPointer(p); !why.empty()) {
      Gpu().Fault(cudaErrorLaunchFailure, why);  // a GPU faults when the kernel reads it: sticky
      return;
    }
  }
  s->Enqueue([grid, block, body = std::move(body)] {
    const std::string fault = RunGrid(grid, block, body);
    if (fault.empty()) return cudaSuccess;
    Gpu().Fault(cudaErrorLaunchFailure, "kernel: " + fault);
    return cudaErrorLaunchFailure;
  });
}

}  // namespace zerofit::cuda_emulation
