// The CUDA runtime API that zerofit calls, emulated on the host (a "GPU" whose memory is host memory, whose
// streams are threads and whose kernels run their CUDA threads as host threads: kernel_launch.h). Builds
// configured with -DZEROFIT_CUDA_EMULATION=ON (the sanitizer builds, scripts/test.sh) compile device/cuda
// and kernels/cuda against this instead of CUDA, so that the CUDA device, its streams and events and every
// kernel run in CI on machines without a GPU, under ASan+UBSan and TSan.
//
// What it checks beyond running the code (each a fault: the call or the kernel fails and stderr says why):
// - a kernel argument that points into host memory that is neither pinned (cudaHostAlloc) nor device memory;
// - a CUDA call from inside a host function (cudaLaunchHostFunc forbids it: cudaErrorNotPermitted);
// - a __syncthreads that not every thread of the block reaches, or threads at different ones;
// - launches with an invalid shape (block of more than 1024 threads, empty grid);
// - a stream created other than non-blocking (the legacy stream's implicit synchronisation is not emulated,
//   and zerofit creates none).
// - host code that reads or writes device memory directly (device pointers are non-canonical addresses:
//   emulated_gpu.h; the access faults).
// Fresh device memory is filled with 0xA5 bytes (cudaMalloc does not zero), shared memory with 0xFF.
//
// What it cannot check: nvcc's code generation and CUDA's own intrinsics (device_functions.h rounds as core/
// dtype.h does), the memory model of a real GPU, performance. Those stay with the gpu-label tests.
//
// Names and values follow CUDA's cuda_runtime_api.h and driver_types.h, for the subset zerofit uses.
#pragma once

#include <cstddef>

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotPermitted = 800,
  cudaErrorNotSupported = 801,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr { cudaDevAttrMemoryPoolsSupported = 115 };

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;

#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define CUDART_CB

typedef void (*cudaHostFn_t)(void* user_data);

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream);
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream);
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data);

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);
