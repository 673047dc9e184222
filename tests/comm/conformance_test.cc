// One conformance suite for every communicator backend built, run under mpiexec at world sizes 1-4
// (local: world size 1 only; nccl: skipped when no GPU is visible). Counts are deliberately not divisible by
// the world size.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "comm/communicator_factory.h"
#include "core/dtype.h"
#include "tests/support/mpi_test_env.h"
#ifdef ZEROFIT_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace zerofit::comm {
namespace {

using core::DType;

// Host-side typed storage that the test uploads to the backend's device and back.
class TestBuffer {
 public:
  TestBuffer(Device device, DType dtype, size_t count) : device_(device), dtype_(dtype), count_(count) {
    host_.resize(count * core::DTypeSize(dtype) + 1);
#ifdef ZEROFIT_HAVE_NCCL
    if (device == Device::kCuda) {
      EXPECT_EQ(cudaMalloc(&dev_, host_.size()), cudaSuccess);
    }
#endif
  }
  ~TestBuffer() {
#ifdef ZEROFIT_HAVE_NCCL
    if (dev_ != nullptr) cudaFree(dev_);
#endif
  }
  void Set(size_t i, double v) {
    if (dtype_ == DType::kFloat64) {
      reinterpret_cast<double*>(host_.data())[i] = v;
    } else {
      core::StoreFromFloat(host_.data(), dtype_, i, static_cast<float>(v));
    }
  }
  double Get(size_t i) const {
    if (dtype_ == DType::kFloat64) return reinterpret_cast<const double*>(host_.data())[i];
    return core::LoadAsFloat(host_.data(), dtype_, i);
  }
  Buffer buffer(size_t offset = 0, size_t count = SIZE_MAX) {
    if (count == SIZE_MAX) count = count_ - offset;
    char* base = device_ == Device::kCuda ? static_cast<char*>(dev_) : host_.data();
    return Buffer{base + offset * core::DTypeSize(dtype_), count, dtype_, device_};
  }
  void Upload() {
#ifdef ZEROFIT_HAVE_NCCL
    if (device_ == Device::kCuda) {
      ASSERT_EQ(cudaMemcpy(dev_, host_.data(), host_.size(), cudaMemcpyHostToDevice), cudaSuccess);
    }
#endif
  }
  void Download() {
#ifdef ZEROFIT_HAVE_NCCL
    if (device_ == Device::kCuda) {
      ASSERT_EQ(cudaMemcpy(host_.data(), dev_, host_.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    }
#endif
  }

 private:
  Device device_;
  DType dtype_;
  size_t count_;
  std::vector<char> host_;
  void* dev_ = nullptr;
};

// Small integers: every sum and product below is exact in bf16 and fp16.
double Value(int rank, size_t i) { return static_cast<double>((rank + 1) * static_cast<int>(i % 5) - 2); }

class ConformanceTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    const auto& env = testing::MpiEnv();
    if (GetParam() == Backend::kLocal && env.world_size() != 1)
      GTEST_SKIP() << "local backend is world size 1";
    if (GetParam() == Backend::kNccl) {
#ifdef ZEROFIT_HAVE_NCCL
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device visible";
      device_ = Device::kCuda;
      context_.cuda_device = env.world_rank() % n;
#endif
    }
    context_.mpi = &env;
    CommOptions options;
    options.timeout = absl::Seconds(30);
    auto c = CreateCommunicator(GetParam(), context_, options);
    ASSERT_TRUE(c.ok()) << c.status();
    comm_ = std::move(*c);
  }

  Device device_ = Device::kCpu;
  CommContext context_;
  std::unique_ptr<Communicator> comm_;
};

const DType kAllTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFloat64};
const size_t kCounts[] = {1, 7, 33, 1001};

TEST_P(ConformanceTest, AllReduceSumMaxMin) {
  const int w = comm_->world_size(), r = comm_->rank();
  for (DType t : kAllTypes) {
    for (size_t n : kCounts) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
        TestBuffer b(device_, t, n);
        for (size_t i = 0; i < n; ++i) b.Set(i, Value(r, i));
        b.Upload();
        ASSERT_TRUE(WaitFor(comm_->AllReduce(b.buffer(), op), absl::Seconds(30)).ok());
        b.Download();
        for (size_t i = 0; i < n; ++i) {
          double want = op == ReduceOp::kSum ? 0 : Value(0, i);
          for (int q = 0; q < w; ++q) {
            if (op == ReduceOp::kSum) want += Value(q, i);
            if (op == ReduceOp::kMax) want = std::max(want, Value(q, i));
            if (op == ReduceOp::kMin) want = std::min(want, Value(q, i));
          }
          ASSERT_EQ(b.Get(i), want) << core::DTypeName(t) << " n=" << n << " op=" << ReduceOpName(op)
                                    << " i=" << i;
        }
      }
    }
  }
}

TEST_P(ConformanceTest, ReduceScatterGivesEachRankItsBlock) {
  const int w = comm_->world_size(), r = comm_->rank();
  for (DType t : kAllTypes) {
    for (size_t n : kCounts) {
      TestBuffer in(device_, t, n * w), out(device_, t, n);
      for (size_t i = 0; i < n * w; ++i) in.Set(i, Value(r, i));
      in.Upload();
      ASSERT_TRUE(
          WaitFor(comm_->ReduceScatter(in.buffer(), out.buffer(), ReduceOp::kSum), absl::Seconds(30)).ok());
      out.Download();
      for (size_t i = 0; i < n; ++i) {
        double want = 0;
        for (int q = 0; q < w; ++q) want += Value(q, r * n + i);
        ASSERT_EQ(out.Get(i), want) << core::DTypeName(t) << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST_P(ConformanceTest, AllGatherOutOfPlaceAndInPlace) {
  const int w = comm_->world_size(), r = comm_->rank();
  for (DType t : kAllTypes) {
    for (size_t n : kCounts) {
      for (bool in_place : {false, true}) {
        TestBuffer in(device_, t, n), out(device_, t, n * w);
        for (size_t i = 0; i < n; ++i) (in_place ? out : in).Set(in_place ? r * n + i : i, Value(r, i));
        in.Upload();
        out.Upload();
        Buffer src = in_place ? out.buffer(r * n, n) : in.buffer();
        ASSERT_TRUE(WaitFor(comm_->AllGather(src, out.buffer()), absl::Seconds(30)).ok());
        out.Download();
        for (int q = 0; q < w; ++q)
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(out.Get(q * n + i), Value(q, i)) << "in_place=" << in_place << " block " << q;
      }
    }
  }
}

TEST_P(ConformanceTest, BroadcastFromEveryRoot) {
  const int w = comm_->world_size(), r = comm_->rank();
  for (int root = 0; root < w; ++root) {
    for (size_t n : kCounts) {
      TestBuffer b(device_, DType::kBFloat16, n);
      for (size_t i = 0; i < n; ++i) b.Set(i, Value(r, i));
      b.Upload();
      ASSERT_TRUE(WaitFor(comm_->Broadcast(b.buffer(), root), absl::Seconds(30)).ok());
      b.Download();
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(b.Get(i), Value(root, i));
    }
  }
}

TEST_P(ConformanceTest, Bf16SumIsRoundedFromFloat) {
  // 1 + k/256 is not representable in bf16 for odd k: each rank contributes an exact bf16 value and the sum
  // must be the fp32 sum rounded to bf16 (within one bf16 ulp when the tree rounds at each level).
  const int w = comm_->world_size(), r = comm_->rank();
  const size_t n = 129;
  TestBuffer b(device_, DType::kBFloat16, n);
  for (size_t i = 0; i < n; ++i) b.Set(i, 1.0 + static_cast<double>((i + r) % 8) / 128.0);
  b.Upload();
  ASSERT_TRUE(WaitFor(comm_->AllReduce(b.buffer(), ReduceOp::kSum), absl::Seconds(30)).ok());
  b.Download();
  for (size_t i = 0; i < n; ++i) {
    double exact = 0;
    for (int q = 0; q < w; ++q) exact += core::Bf16ToFloat(core::FloatToBf16(1.0f + ((i + q) % 8) / 128.0f));
    const double ulp = std::ldexp(1.0, static_cast<int>(std::floor(std::log2(exact))) - 7);
    ASSERT_LE(std::fabs(b.Get(i) - exact), ulp) << "i=" << i;
  }
}

TEST_P(ConformanceTest, BarrierCompletes) { EXPECT_TRUE(comm_->Barrier(absl::Seconds(30)).ok()); }

TEST_P(ConformanceTest, MismatchedLocalSizesAreRejected) {
  const int w = comm_->world_size();
  TestBuffer in(device_, DType::kFloat32, 10 * w + 1), out(device_, DType::kFloat32, 10);
  auto rs = comm_->ReduceScatter(in.buffer(), out.buffer(), ReduceOp::kSum);
  ASSERT_FALSE(rs.ok());
  EXPECT_EQ(rs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rs.status().message().find("exactly output.count * world_size"), std::string::npos)
      << rs.status();
  TestBuffer small(device_, DType::kFloat32, 10 * w - 1);
  auto ag = comm_->AllGather(out.buffer(), small.buffer());
  ASSERT_FALSE(ag.ok());
  EXPECT_EQ(ag.status().code(), absl::StatusCode::kInvalidArgument);
  TestBuffer half(device_, DType::kBFloat16, 10 * w);
  EXPECT_EQ(comm_->ReduceScatter(half.buffer(), out.buffer(), ReduceOp::kSum).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(comm_->Broadcast(out.buffer(), w).status().code(), absl::StatusCode::kInvalidArgument);
  // The communicator is still usable after rejected calls.
  EXPECT_TRUE(comm_->Barrier(absl::Seconds(30)).ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, ConformanceTest, ::testing::ValuesIn(BuiltBackends()),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(BackendName(info.param));
                         });

}  // namespace
}  // namespace zerofit::comm
