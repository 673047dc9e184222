// The fused model kernels' CUDA launchers (kernels/cuda/*.cu) on the emulated GPU (tests/cuda_emulation/
// runtime_api.h), called through kernels/dispatch.h with device buffers, against the host references. The
// emulation computes exp and 1/sqrt as the host does, so what model_kernels.h allows a GPU beyond the
// reference (a few ulps of its exponential and reciprocal square root) is zero here: the element-wise kernels
// (SwiGLU, rotary embedding) must give the reference's bits. RMSNorm sums in another order (a tree, not the
// reference's index order), so its values are checked within bounds that follow from the sums' lengths, and
// its determinism bit for bit. Shapes exceed the emulated grids' caps (4 blocks), so that grid-stride loops
// run several times per thread. On a GPU, fused_kernels_gpu_test checks the same launchers with torch.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/dispatch.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace zerofit::kernels {
namespace {

using core::DType;

const double kU = std::ldexp(1.0, -24);  // fp32 unit roundoff

// n values of `type` from sin/cos of their index (varied signs and magnitudes, no randomness needed).
std::vector<uint8_t> Values(size_t n, DType type, float phase, float scale) {
  std::vector<uint8_t> out(n * core::DTypeSize(type));
  for (size_t i = 0; i < n; ++i) {
    core::StoreFromFloat(out.data(), type, i, scale * std::sin(0.37f * static_cast<float>(i) + phase));
  }
  return out;
}

// Device memory that frees itself.
class DeviceBytes {
 public:
  explicit DeviceBytes(size_t bytes) { EXPECT_EQ(cudaMalloc(&p_, bytes), cudaSuccess); }
  explicit DeviceBytes(const std::vector<uint8_t>& host) : DeviceBytes(host.size()) {
    EXPECT_EQ(cudaMemcpy(p_, host.data(), host.size(), cudaMemcpyDefault), cudaSuccess);
  }
  ~DeviceBytes() { cudaFree(p_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  void* get() const { return p_; }
  float* f() const { return static_cast<float*>(p_); }
  std::vector<uint8_t> Download(size_t bytes) const {
    std::vector<uint8_t> host(bytes);
    EXPECT_EQ(cudaMemcpy(host.data(), p_, bytes, cudaMemcpyDefault), cudaSuccess);
    return host;
  }

 private:
  void* p_ = nullptr;
};

class EmulatedCudaKernels : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    cudaStreamDestroy(stream_);
  }
  Place Cuda() const { return Place::Cuda(stream_); }
  size_t Bytes(size_t n) const { return n * core::DTypeSize(GetParam()); }

  cudaStream_t stream_ = nullptr;
};

TEST_P(EmulatedCudaKernels, SwiGluIsTheReferenceBitForBit) {
  const DType t = GetParam();
  const size_t n = 4 * 256 * 3 + 77;
  const std::vector<uint8_t> gate = Values(n, t, 0.2f, 4.0f), up = Values(n, t, 2.1f, 2.0f);
  const std::vector<uint8_t> grad = Values(n, t, 1.3f, 1.0f);
  std::vector<uint8_t> out(Bytes(n)), dg(Bytes(n)), du(Bytes(n));
  SwiGluForwardHost(gate.data(), up.data(), t, n, out.data());
  SwiGluBackwardHost(grad.data(), gate.data(), up.data(), t, n, dg.data(), du.data());
  DeviceBytes d_gate(gate), d_up(up), d_grad(grad), d_out(Bytes(n)), d_dg(Bytes(n)), d_du(Bytes(n));
  ASSERT_TRUE(SwiGluForward(Cuda(), d_gate.get(), d_up.get(), t, n, d_out.get()).ok());
  ASSERT_TRUE(
      SwiGluBackward(Cuda(), d_grad.get(), d_gate.get(), d_up.get(), t, n, d_dg.get(), d_du.get()).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(d_out.Download(Bytes(n)), out);
  EXPECT_EQ(d_dg.Download(Bytes(n)), dg);
  EXPECT_EQ(d_du.Download(Bytes(n)), du);
}

TEST_P(EmulatedCudaKernels, RopeIsTheReferenceBitForBit) {
  const DType t = GetParam();
  for (bool per_row : {false, true}) {
    SCOPED_TRACE(per_row ? "per-row angles" : "one table");
    RopeShape shape;
    shape.batch = 3, shape.seq = 7, shape.heads = 5, shape.head_dim = 16, shape.per_row_angles = per_row;
    const size_t n = shape.elements(), angles = (per_row ? shape.batch : 1) * shape.seq * shape.head_dim;
    const std::vector<uint8_t> x = Values(n, t, 0.1f, 3.0f), cos = Values(angles, t, 0.5f, 1.0f);
    const std::vector<uint8_t> sin = Values(angles, t, 0.9f, 1.0f);
    std::vector<uint8_t> y(Bytes(n)), dx(Bytes(n));
    RopeForwardHost(x.data(), cos.data(), sin.data(), t, shape, y.data());
    RopeBackwardHost(x.data(), cos.data(), sin.data(), t, shape, dx.data());
    DeviceBytes d_x(x), d_cos(cos), d_sin(sin), d_y(Bytes(n)), d_dx(Bytes(n));
    ASSERT_TRUE(RopeForward(Cuda(), d_x.get(), d_cos.get(), d_sin.get(), t, shape, d_y.get()).ok());
    ASSERT_TRUE(RopeBackward(Cuda(), d_x.get(), d_cos.get(), d_sin.get(), t, shape, d_dx.get()).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(d_y.Download(Bytes(n)), y);
    EXPECT_EQ(d_dx.Download(Bytes(n)), dx);
  }
}

// fp32 RMSNorm. A sum of n positive terms in any order is within (n - 1) u of the exact sum, so two orders
// differ by at most 2 (n - 1) u relative; rstd = (sum / n + eps)^-1/2 then differs by at most half that plus
// a few u of its own operations, and y = w round(x rstd) by that plus the two products' 2 u on each side. The
// backward's c = sum of round(dy w) x over the row has mixed signs: two orders differ by at most 2 (n - 1) u
// of the sum of the terms' magnitudes, which k = c (-1/2) rstd^3 (2 / n) carries into dx = dn rstd + k x,
// plus a few u of dx's own operations. dw adds the rows' terms in row order on both sides: its bits match,
// given the same rstd.
TEST(EmulatedCudaKernelsFp32, RmsNormIsTheReferenceWithinItsSumsBounds) {
  const RmsNormShape shape{9, 4 * 256 + 45};
  const size_t n = shape.rows * shape.cols;
  const double cols = static_cast<double>(shape.cols);
  const float eps = 1e-6f;
  const std::vector<uint8_t> x = Values(n, DType::kFloat32, 0.1f, 2.0f),
                             w = Values(shape.cols, DType::kFloat32, 0.7f, 1.5f);
  const std::vector<uint8_t> dy = Values(n, DType::kFloat32, 1.3f, 1.0f);
  std::vector<float> y(n), rstd(shape.rows), dx(n), dw(shape.cols);
  RmsNormForwardHost(x.data(), w.data(), DType::kFloat32, shape, eps, y.data(), rstd.data());
  RmsNormBackwardHost(dy.data(), x.data(), w.data(), rstd.data(), DType::kFloat32, shape, dx.data(),
                      dw.data());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  DeviceBytes d_x(x), d_w(w), d_dy(dy), d_y(n * 4), d_rstd(shape.rows * 4), d_dx(n * 4), d_dw(shape.cols * 4);
  DeviceBytes d_ref_rstd(std::vector<uint8_t>(reinterpret_cast<uint8_t*>(rstd.data()),
                                              reinterpret_cast<uint8_t*>(rstd.data() + shape.rows)));
  DeviceBytes d_scratch(RmsNormBackwardScratchFloats(shape) * 4);
  ASSERT_TRUE(RmsNormForward(Place::Cuda(stream), d_x.get(), d_w.get(), DType::kFloat32, shape, eps,
                             d_y.get(), d_rstd.f())
                  .ok());
  ASSERT_TRUE(RmsNormBackward(Place::Cuda(stream), d_dy.get(), d_x.get(), d_w.get(), d_ref_rstd.f(),
                              DType::kFloat32, shape, d_dx.get(), d_dw.get(), d_scratch.f())
                  .ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  auto floats = [](const std::vector<uint8_t>& bytes) {
    std::vector<float> f(bytes.size() / 4);
    std::memcpy(f.data(), bytes.data(), bytes.size());
    return f;
  };
  const std::vector<float> got_y = floats(d_y.Download(n * 4)),
                           got_rstd = floats(d_rstd.Download(shape.rows * 4));
  const std::vector<float> got_dx = floats(d_dx.Download(n * 4)),
                           got_dw = floats(d_dw.Download(shape.cols * 4));
  const float* xf = reinterpret_cast<const float*>(x.data());
  const float* wf = reinterpret_cast<const float*>(w.data());
  const float* dyf = reinterpret_cast<const float*>(dy.data());
  const double rstd_rel = (cols - 1) * kU + 8 * kU;
  for (size_t r = 0; r < shape.rows; ++r) {
    EXPECT_LE(std::abs(got_rstd[r] - rstd[r]), rstd_rel * rstd[r]) << "row " << r;
    double magnitude = 0;  // of c's terms
    for (size_t j = 0; j < shape.cols; ++j)
      magnitude += std::abs(double{dyf[r * shape.cols + j]} * wf[j] * xf[r * shape.cols + j]);
    const double r3 = std::pow(double{rstd[r]}, 3);
    const double k_bound = 2 * (cols - 1) * kU * magnitude * 0.5 * r3 * (2 / cols) * (1 + 8 * kU);
    for (size_t j = 0; j < shape.cols; ++j) {
      const size_t i = r * shape.cols + j;
      EXPECT_LE(std::abs(got_y[i] - y[i]), (rstd_rel + 4 * kU) * std::abs(y[i]) + 1e-30) << "y " << i;
      const double dn_r = std::abs(double{dyf[i]} * wf[j] * rstd[r]);
      const double k_x =
          std::abs(double{dx[i]} - double{dyf[i]} * wf[j] * rstd[r]) + k_bound * std::abs(xf[i]);
      EXPECT_LE(std::abs(double{got_dx[i]} - dx[i]), k_bound * std::abs(xf[i]) + 8 * kU * (dn_r + k_x))
          << "dx " << i;
    }
  }
  EXPECT_EQ(std::memcmp(got_dw.data(), dw.data(), dw.size() * 4), 0) << "dw: the rows' terms in row order";
  // Deterministic: a second forward gives the same bits.
  DeviceBytes d_y2(n * 4), d_rstd2(shape.rows * 4);
  ASSERT_TRUE(RmsNormForward(Place::Cuda(stream), d_x.get(), d_w.get(), DType::kFloat32, shape, eps,
                             d_y2.get(), d_rstd2.f())
                  .ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(d_y2.Download(n * 4), d_y.Download(n * 4));
  EXPECT_EQ(d_rstd2.Download(shape.rows * 4), d_rstd.Download(shape.rows * 4));
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Types, EmulatedCudaKernels,
                         ::testing::Values(DType::kFloat32, DType::kBFloat16, DType::kFloat16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(core::DTypeName(info.param));
                         });

}  // namespace
}  // namespace zerofit::kernels
