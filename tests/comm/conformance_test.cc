// One conformance suite for every communicator backend built, run under mpiexec at world sizes 1-4
// (local: world size 1 only; nccl: skipped when no GPU is visible), and for the staged decorator over MPI
// (comm/staged_communicator.h) with the test device, whose delayed streams do its copies in and back: every
// buffer of that variant goes through pinned staging. Counts are deliberately not divisible by the world
// size.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "comm/communicator_factory.h"
#include "comm/staged_communicator.h"
#include "core/dtype.h"
#include "device/test/test_device.h"
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

// A backend, or the staged decorator over it on the test device.
struct Variant {
  Backend backend;
  bool staged = false;
};

std::vector<Variant> Variants() {
  std::vector<Variant> out;
  for (Backend b : BuiltBackends()) out.push_back({b});
  out.push_back({Backend::kMpi, /*staged=*/true});  // this suite is built with MPI only
  return out;
}

class ConformanceTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    const auto& env = testing::MpiEnv();
    if (GetParam().backend == Backend::kLocal && env.world_size() != 1)
      GTEST_SKIP() << "local backend is world size 1";
    if (GetParam().backend == Backend::kNccl) {
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
    auto c = CreateCommunicator(GetParam().backend, context_, options);
    ASSERT_TRUE(c.ok()) << c.status();
    comm_ = std::move(*c);
    if (GetParam().staged) {
      device::TestDeviceOptions to;
      to.seed = 77 + env.world_rank();
      to.max_delay = absl::Microseconds(100);
      test_device_ = std::make_unique<device::TestDevice>(to);
      auto staged = StagedCommunicator::Create(std::move(comm_), test_device_.get());
      ASSERT_TRUE(staged.ok()) << staged.status();
      comm_ = std::move(*staged);
    }
  }

  // The staged variant's calls really were staged (every buffer is, on the test device).
  void TearDown() override {
    if (auto* staged = dynamic_cast<StagedCommunicator*>(comm_.get())) {
      EXPECT_EQ(staged->stats().passed_through_calls, 0u);
    }
  }

  Device device_ = Device::kCpu;
  CommContext context_;
  std::unique_ptr<device::TestDevice> test_device_;  // staged variant: declared before comm_, outlives it
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

// Stream order (communicator.h): inputs written on a producer stream are read only after it, results are
// read on a consumer stream after OrderBefore, with several collectives in flight. On the test device the
// producer's copies and the consumer's reads run late and at random: a collective that reads early sums the
// zeroed buffers, a consumer that is not ordered reads the rank's own input instead of the sum.
TEST_P(ConformanceTest, ProducerAndConsumerStreamsOrderTheCollective) {
  if (GetParam().backend == Backend::kNccl) GTEST_SKIP() << "CUDA streams: tests/comm/nccl_gpu_test.cc";
  device::TestDeviceOptions to;
  to.seed = 5 + comm_->rank();
  to.max_delay = absl::Microseconds(300);
  device::TestDevice own(to);
  device::Device& dev = test_device_ ? *test_device_ : own;
  auto producer = dev.CreateStream();
  auto consumer = dev.CreateStream();
  ASSERT_TRUE(producer.ok() && consumer.ok());
  const int w = comm_->world_size(), r = comm_->rank();
  const size_t n = 1001;
  const int kInFlight = 6;
  for (int round = 0; round < 2; ++round) {
    std::vector<std::vector<float>> src(kInFlight), got(kInFlight);
    std::vector<device::Buffer> in(kInFlight), out(kInFlight);
    std::vector<std::unique_ptr<Work>> work(kInFlight);
    for (int k = 0; k < kInFlight; ++k) {
      const bool scatter = k % 2 == 1;  // alternate all-reduce and reduce-scatter
      const size_t in_count = scatter ? n * w : n;
      src[k].resize(in_count);
      for (size_t i = 0; i < in_count; ++i) src[k][i] = static_cast<float>(Value(r, i) + k + round);
      auto a = dev.Allocate(in_count * sizeof(float), device::MemoryKind::kDevice);
      auto b = dev.Allocate(n * sizeof(float), device::MemoryKind::kDevice);
      ASSERT_TRUE(a.ok() && b.ok());
      in[k] = std::move(*a);
      out[k] = std::move(*b);
      ASSERT_TRUE((*producer)->Copy(in[k].data(), src[k].data(), in_count * sizeof(float)).ok());
      const Buffer bin{in[k].data(), in_count, DType::kFloat32, device_};
      auto issued = scatter ? comm_->ReduceScatter(bin, Buffer{out[k].data(), n, DType::kFloat32, device_},
                                                   ReduceOp::kSum, producer->get())
                            : comm_->AllReduce(bin, ReduceOp::kSum, producer->get());
      ASSERT_TRUE(issued.ok()) << issued.status();
      work[k] = std::move(*issued);
    }
    for (int k = 0; k < kInFlight; ++k) {
      ASSERT_TRUE(work[k]->OrderBefore(**consumer, absl::Seconds(30)).ok());
      got[k].resize(n);
      const void* result = k % 2 == 1 ? out[k].data() : in[k].data();
      ASSERT_TRUE((*consumer)->Copy(got[k].data(), result, n * sizeof(float)).ok());
    }
    ASSERT_TRUE((*consumer)->Synchronize(absl::Seconds(30)).ok());
    for (int k = 0; k < kInFlight; ++k) {
      EXPECT_TRUE(work[k]->Wait(absl::Seconds(30)).ok());
      const size_t offset = k % 2 == 1 ? r * n : 0;  // a reduce-scatter returns this rank's block
      for (size_t i = 0; i < n; ++i) {
        double want = 0;
        for (int q = 0; q < w; ++q) want += Value(q, offset + i) + k + round;
        ASSERT_EQ(got[k][i], want) << "round " << round << " collective " << k << " i=" << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ConformanceTest, ::testing::ValuesIn(Variants()),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return std::string(BackendName(info.param.backend)) +
                                  (info.param.staged ? "_staged_test_device" : "");
                         });

}  // namespace
}  // namespace zerofit::comm
