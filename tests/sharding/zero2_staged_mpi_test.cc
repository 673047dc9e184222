// ZeRO-2 over the staged communicator (comm/staged_communicator.h): several ranks that share one device
// train over MPI, every device buffer staged through pinned host memory, and must end where the host oracle
// (the host device over plain MPI) does, for both accumulation modes, with and without offload.
//
// Two registrations of this one program (tests/CMakeLists.txt):
//  - label mpi, 2-4 ranks, the test device (ZEROFIT_STAGED_DEVICE unset): every stream is a thread with
//  random
//    delays; the kernels are the host's and the collectives see the same bytes as the oracle's, so the
//    result must be BIT-identical. A missing event wait in the staging (copy in before the producer, copy
//    back after the consumer) changes the numbers.
//  - label gpu, 2 and 4 ranks sharing cuda:0 (ZEROFIT_STAGED_DEVICE=cuda; skipped without a GPU): the
//    collectives are still bit-exact (MPI on the same bytes), and so are the CUDA copies, accumulations and
//    conversions (tests/device: bit-identical to the host references). Two kernels may differ: the squared
//    gradient norm sums in another order (1e-10 relative, tests/device), which can move the clipping factor
//    by one fp32 ulp, and AdamW, whose device result is held to 1e-6 relative of the host's per call. The
//    gradients here do not depend on the parameters, so nothing feeds back through a forward pass: after
//    kSteps updates the fp32 state is within kSteps * 1e-6 relative of the oracle (near-zero elements
//    against the vector's largest magnitude), a bf16 parameter within one bf16 ulp of it (one rounding of
//    values that close), and each step's gradient norm within 1e-6 relative (one fp32 rounding of values
//    1e-10 apart is 1.2e-7).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator_factory.h"
#include "comm/staged_communicator.h"
#include "device/device_factory.h"
#include "device/host/host_device.h"
#include "device/test/test_device.h"
#include "sharding/zero2_optimizer.h"
#include "tests/sharding/zero2_mpi_job.h"
#include "tests/sharding/zero2_stream_training.h"
#include "tests/sharding/zero2_test_job.h"
#include "tests/support/mpi_test_env.h"

namespace zerofit::sharding {
namespace {

using testjob::Config;
using testjob::Outcome;

using testjob::kSteps;
using testjob::kTimeout;

bool OnCuda() {
  const char* d = std::getenv("ZEROFIT_STAGED_DEVICE");
  return d != nullptr && std::string(d) == "cuda";
}

// fp32 values within `rel` of the oracle's, elements near zero against the vector's largest magnitude.
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double rel,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double largest = 0;
  for (float x : want) largest = std::max(largest, std::fabs(static_cast<double>(x)));
  for (size_t i = 0; i < want.size(); ++i) {
    const double bound = rel * std::max(std::fabs(static_cast<double>(want[i])), 1e-3 * largest);
    ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), bound) << what << " element " << i;
  }
}

// Parameters in `t`: fp32 as above; bf16/fp16 within one ulp of their own type.
void ExpectParamsClose(const Outcome& got, const Outcome& want, core::DType t, double rel,
                       const std::string& what) {
  ASSERT_EQ(got.params.size(), want.params.size()) << what;
  const size_t n = want.params.size() / core::DTypeSize(t);
  std::vector<float> g(n), w(n);
  for (size_t i = 0; i < n; ++i) {
    g[i] = core::LoadAsFloat(got.params.data(), t, i);
    w[i] = core::LoadAsFloat(want.params.data(), t, i);
  }
  if (t == core::DType::kFloat32) return ExpectClose(g, w, rel, what + " parameters");
  const int mantissa = t == core::DType::kBFloat16 ? 7 : 10;
  for (size_t i = 0; i < n; ++i) {
    if (g[i] == w[i]) continue;
    const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(g[i]), std::fabs(w[i]))) - mantissa);
    ASSERT_LE(std::fabs(static_cast<double>(g[i]) - w[i]), ulp) << what << " parameter " << i;
  }
}

class Zero2StagedMpiTest : public ::testing::TestWithParam<Config> {};

TEST_P(Zero2StagedMpiTest, SharedDeviceOverStagedMpiEqualsTheHostOracle) {
  const Config& c = GetParam();
  auto mpi = testjob::MakeMpi(kTimeout);
  ASSERT_NE(mpi, nullptr);
  std::unique_ptr<device::Device> dev;
  if (OnCuda()) {
    if (device::CudaDeviceCount() == 0) GTEST_SKIP() << "no CUDA device visible";
    device::DeviceOptions o;
    o.choice = device::DeviceChoice::kCuda;
    o.index = 0;  // every rank on cuda:0: the mode under test
    auto d = device::CreateDevice(o);
    ASSERT_TRUE(d.ok()) << d.status();
    dev = std::move(*d);
  } else {
    device::TestDeviceOptions to;
    to.seed = 4242 + mpi->rank();
    to.max_delay = absl::Microseconds(200);
    dev = std::make_unique<device::TestDevice>(to);
  }
  device::HostDevice host;
  const Outcome want = testjob::TrainThroughComputeStream(c, &host, mpi.get(), mpi.get());
  ASSERT_FALSE(want.params.empty());
  Outcome got;
  {
    auto staged = comm::StagedCommunicator::Create(mpi.get(), dev.get());
    ASSERT_TRUE(staged.ok()) << staged.status();
    got = testjob::TrainThroughComputeStream(c, dev.get(), staged->get(), mpi.get());
    const comm::StagingStats stats = (*staged)->stats();
    EXPECT_GT(stats.staged_calls, 0u);
    EXPECT_EQ(stats.passed_through_calls, 0u) << "every ZeRO-2 collective carries device memory";
  }
  const std::string where = c.name + " on rank " + std::to_string(mpi->rank()) + " (" + dev->name() + ")";
  if (dev->kind() != device::DeviceKind::kCuda) {
    EXPECT_EQ(got.params, want.params) << where << ": parameters differ";
    EXPECT_EQ(got.master, want.master) << where;
    EXPECT_EQ(got.m, want.m) << where;
    EXPECT_EQ(got.v, want.v) << where;
    EXPECT_EQ(got.grad_norms, want.grad_norms) << where;
    return;
  }
  const double rel = kSteps * 1e-6;
  ExpectParamsClose(got, want, c.dtype, rel, where);
  ExpectClose(got.master, want.master, rel, where + " master");
  ExpectClose(got.m, want.m, rel, where + " exp_avg");
  ExpectClose(got.v, want.v, rel, where + " exp_avg_sq");
  ExpectClose(got.grad_norms, want.grad_norms, 1e-6, where + " grad norms");
}

INSTANTIATE_TEST_SUITE_P(
    BothModesWithAndWithoutOffload, Zero2StagedMpiTest,
    ::testing::Values(Config{"every_bf16", AccumulationMode::kReduceScatterEveryMicroBatch,
                             core::DType::kBFloat16, false, false},
                      Config{"once_fp32", AccumulationMode::kReduceOncePerStep, core::DType::kFloat32, false,
                             false},
                      Config{"every_fp32_offload", AccumulationMode::kReduceScatterEveryMicroBatch,
                             core::DType::kFloat32, true, false},
                      Config{"once_bf16_offload", AccumulationMode::kReduceOncePerStep,
                             core::DType::kBFloat16, true, false},
                      Config{"every_bf16_offload_delayed", AccumulationMode::kReduceScatterEveryMicroBatch,
                             core::DType::kBFloat16, true, true}),
    [](const ::testing::TestParamInfo<Config>& info) { return info.param.name; });

}  // namespace
}  // namespace zerofit::sharding
