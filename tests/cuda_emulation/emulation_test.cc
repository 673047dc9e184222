// The CUDA emulation itself (runtime_api.h): kernels with shared memory, warp shuffles and barriers run as
// on a GPU, and what a GPU would fault on (or leave undefined) is reported as a fault. A fault is sticky for
// the whole process, as on a GPU, so each one is provoked in a death test's own process.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/cuda_emulation/test_kernels.h"

namespace zerofit::cuda_emulation::test {
namespace {

template <typename T>
T* DeviceArray(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return static_cast<T*>(p);
}

TEST(CudaEmulation, ABlockReductionWithSharedMemoryShufflesAndBarriersGivesEveryBlocksSum) {
  for (unsigned threads : {32u, 256u, 1024u}) {
    SCOPED_TRACE(threads);
    const unsigned blocks = 6;
    std::vector<float> in(blocks * threads);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 97);  // integers: sums are exact
    float* d_in = DeviceArray<float>(in.size());
    float* d_out = DeviceArray<float>(blocks);
    int* d_foreign = DeviceArray<int>(1);
    ASSERT_EQ(cudaMemsetAsync(d_foreign, 0, sizeof(int), nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(d_in, in.data(), in.size() * sizeof(float), cudaMemcpyDefault, nullptr),
              cudaSuccess);
    ASSERT_EQ(LaunchBlockSum(d_in, d_out, d_foreign, blocks, threads, nullptr), cudaSuccess);
    std::vector<float> out(blocks);
    int foreign = -1;
    ASSERT_EQ(cudaMemcpy(out.data(), d_out, blocks * sizeof(float), cudaMemcpyDefault), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(&foreign, d_foreign, sizeof(int), cudaMemcpyDefault), cudaSuccess);
    for (unsigned b = 0; b < blocks; ++b) {
      double expected = 0;
      for (unsigned t = 0; t < threads; ++t) expected += in[b * threads + t];
      EXPECT_EQ(out[b], expected) << "block " << b;
    }
    EXPECT_EQ(foreign, 0) << "a block saw another block's shared memory";
    for (void* p : {static_cast<void*>(d_in), static_cast<void*>(d_out), static_cast<void*>(d_foreign)}) {
      EXPECT_EQ(cudaFree(p), cudaSuccess);
    }
  }
}

TEST(CudaEmulation, FreshDeviceMemoryIsNotZeroed) {
  unsigned char* d = DeviceArray<unsigned char>(64);
  std::vector<unsigned char> host(64, 0);
  ASSERT_EQ(cudaMemcpy(host.data(), d, 64, cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(host, std::vector<unsigned char>(64, 0xA5));
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(CudaEmulation, AnInvalidLaunchShapeIsThatLaunchsErrorOnly) {
  float* d = DeviceArray<float>(2048);
  EXPECT_EQ(LaunchBlockSum(d, d, nullptr, 1, 1025, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "read once, then cleared";
  EXPECT_EQ(LaunchBlockSum(d, d, nullptr, 0, 32, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess) << "not sticky";
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

TEST(CudaEmulation, PinnedHostMemoryIsAKernelArgumentAGpuCanRead) {
  void* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(&pinned, sizeof(float), cudaHostAllocPortable), cudaSuccess);
  *static_cast<float*>(pinned) = 2.5f;
  float* d_out = DeviceArray<float>(1);
  ASSERT_EQ(LaunchRead(static_cast<float*>(pinned), d_out, nullptr), cudaSuccess);
  float out = 0;
  ASSERT_EQ(cudaMemcpy(&out, d_out, sizeof(float), cudaMemcpyDefault), cudaSuccess);
  EXPECT_EQ(out, 2.5f);
  EXPECT_EQ(cudaFree(d_out), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

class CudaEmulationFault : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// Exits 0 when the stream reports the launch failure the fault must cause.
[[noreturn]] void ExitWithStreamResult() {
  std::exit(cudaStreamSynchronize(nullptr) == cudaErrorLaunchFailure ? 0 : 1);
}

TEST_F(CudaEmulationFault, ABarrierThatSomeThreadsSkip) {
  EXPECT_EXIT(
      {
        if (LaunchDivergentBarrier(64, 5, nullptr) != cudaSuccess) std::exit(2);
        ExitWithStreamResult();
      },
      ::testing::ExitedWithCode(0),
      "kernel: block 0: threads meet at .* every thread must reach the same barrier");
}

TEST_F(CudaEmulationFault, AKernelArgumentInPageableHostMemory) {
  EXPECT_EXIT(
      {
        std::vector<float> pageable(1, 1.0f);
        float* d_out = DeviceArray<float>(1);
        LaunchRead(pageable.data(), d_out, nullptr);  // may already see the sticky fault
        ExitWithStreamResult();
      },
      ::testing::ExitedWithCode(0), "neither device memory nor pinned host memory");
}

// Device pointers are not host addresses (emulated_gpu.h): a host store through one faults, as on a GPU.
TEST_F(CudaEmulationFault, AHostWriteToDeviceMemory) {
  EXPECT_DEATH(
      {
        float* d = DeviceArray<float>(4);
        *static_cast<volatile float*>(d + 1) = 1.0f;
      },
      "");
}

TEST_F(CudaEmulationFault, ACudaCallInsideAHostFunction) {
  EXPECT_EXIT(
      {
        // The fault is sticky, so cudaStreamSynchronize returns it at once: the result is awaited here.
        static std::atomic<int> inside{-1};
        auto call_cuda = [](void*) {
          void* p = nullptr;
          inside = cudaMalloc(&p, 16);
        };
        if (cudaLaunchHostFunc(nullptr, call_cuda, nullptr) != cudaSuccess) std::exit(2);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        while (inside.load() == -1 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        std::exit(inside.load() == cudaErrorNotPermitted ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "cudaMalloc called from a host function");
}

#if defined(__SANITIZE_THREAD__)
// CUDA threads are host threads: ThreadSanitizer sees a race on a block's shared memory as any other
// (the TSan build, where the kernels of device/cuda and kernels/cuda run under it).
TEST_F(CudaEmulationFault, ASharedMemoryRaceReachesThreadSanitizer) {
  EXPECT_DEATH(
      {
        float* d_out = DeviceArray<float>(64);
        LaunchRacy(d_out, 64, nullptr);
        cudaStreamSynchronize(nullptr);
        std::exit(0);
      },
      "ThreadSanitizer: data race");
}
#endif

}  // namespace
}  // namespace zerofit::cuda_emulation::test
