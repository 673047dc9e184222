// The NCCL communicator on real GPUs (label gpu; skips without one): collectives on one rank, finalize on
// destruction and Abort without hanging, and two ranks driven from two threads when two GPUs are visible
// (every call must make its own GPU current).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "comm/nccl/nccl_communicator.h"

namespace zerofit::comm {
namespace {

int Gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

// Device memory holding `v`, freed by the destructor.
struct DeviceFloats {
  DeviceFloats(int device, const std::vector<float>& v) : count(v.size()) {
    EXPECT_EQ(cudaSetDevice(device), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&data, v.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(data, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(data); }
  std::vector<float> Read() const {
    std::vector<float> out(count);
    EXPECT_EQ(cudaMemcpy(out.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  Buffer buffer() const { return Buffer{data, count, DType::kFloat32, Device::kCuda}; }
  void* data = nullptr;
  size_t count;
};

class NcclGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Gpus() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
};

TEST_F(NcclGpu, CollectivesOnOneRankAndCleanDestruction) {
  auto id = NcclCommunicator::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  CommOptions options;
  options.timeout = absl::Seconds(60);
  auto comm = NcclCommunicator::Create(*id, 0, 1, 0, options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  DeviceFloats a(0, {1, 2, 3, 4});
  DeviceFloats b(0, {0, 0, 0, 0});
  for (int round = 0; round < 3; ++round) {
    auto w = (*comm)->AllReduce(a.buffer(), ReduceOp::kSum);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->Wait(absl::Seconds(60)).ok());
    auto g = (*comm)->AllGather(a.buffer(), b.buffer());
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE((*g)->Wait(absl::Seconds(60)).ok());
    EXPECT_TRUE((*g)->IsCompleted());
    auto r = (*comm)->ReduceScatter(b.buffer(), a.buffer(), ReduceOp::kMax);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE((*r)->Wait(absl::Seconds(60)).ok());
    auto c = (*comm)->Broadcast(a.buffer(), 0);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Wait(absl::Seconds(60)).ok());
  }
  EXPECT_EQ(a.Read(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_TRUE((*comm)->Barrier(absl::Seconds(60)).ok());
  const absl::Time start = absl::Now();
  comm->reset();  // finalize + destroy
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

TEST_F(NcclGpu, AbortNeverBlocksAndLaterCallsFail) {
  auto id = NcclCommunicator::NewUniqueId();
  ASSERT_TRUE(id.ok());
  auto comm = NcclCommunicator::Create(*id, 0, 1, 0, {});
  ASSERT_TRUE(comm.ok()) << comm.status();
  const absl::Time start = absl::Now();
  (*comm)->Abort();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  DeviceFloats a(0, {1});
  EXPECT_EQ((*comm)->AllReduce(a.buffer(), ReduceOp::kSum).status().code(), absl::StatusCode::kAborted);
}

TEST_F(NcclGpu, TwoRanksOnTwoGpusFromTwoThreads) {
  if (Gpus() < 2) GTEST_SKIP() << "needs 2 GPUs";
  auto id = NcclCommunicator::NewUniqueId();
  ASSERT_TRUE(id.ok());
  std::vector<std::vector<float>> results(2);
  std::vector<absl::Status> status(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      CommOptions options;
      options.timeout = absl::Seconds(60);
      auto comm = NcclCommunicator::Create(*id, rank, 2, rank, options);
      if (!comm.ok()) {
        status[rank] = comm.status();
        return;
      }
      cudaSetDevice(1 - rank);  // the communicator must not depend on this thread's current device
      DeviceFloats buf(rank, {static_cast<float>(rank + 1), 10.0f});
      cudaSetDevice(1 - rank);
      auto w = (*comm)->AllReduce(buf.buffer(), ReduceOp::kSum);
      status[rank] = w.ok() ? (*w)->Wait(absl::Seconds(60)) : w.status();
      results[rank] = buf.Read();
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(status[rank].ok()) << "rank " << rank << ": " << status[rank];
    EXPECT_EQ(results[rank], (std::vector<float>{3.0f, 20.0f})) << "rank " << rank;
  }
}

}  // namespace
}  // namespace zerofit::comm
