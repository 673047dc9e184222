// kernels/dispatch.h: a host place runs the references with the caller's buffers in their places, and a CUDA
// place that cannot launch (no kernels in this build, or no GPU) is an error naming the kernel, never a
// silent fallback. The launches themselves are checked on a GPU by fused_kernels_gpu_test.
#include "kernels/dispatch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "device/device_factory.h"
#include "kernels/rms_norm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace zerofit::kernels {
namespace {

using core::DType;

std::vector<float> Values(size_t n, float phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i) + phase);
  return v;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(KernelDispatchTest, AHostPlaceRunsTheReferencesWithTheBuffersInTheirPlaces) {
  const RmsNormShape norm{3, 8};
  const std::vector<float> x = Values(24, 0.1f), w = Values(8, 0.7f), dy = Values(24, 1.3f);
  std::vector<float> y(24), rstd(3), y_ref(24), rstd_ref(3);
  ASSERT_TRUE(
      RmsNormForward(Place::Host(), x.data(), w.data(), DType::kFloat32, norm, 1e-6f, y.data(), rstd.data())
          .ok());
  RmsNormForwardHost(x.data(), w.data(), DType::kFloat32, norm, 1e-6f, y_ref.data(), rstd_ref.data());
  EXPECT_TRUE(SameBits(y, y_ref) && SameBits(rstd, rstd_ref));
  std::vector<float> dx(24), dw(8), dx_ref(24), dw_ref(8);
  ASSERT_TRUE(RmsNormBackward(Place::Host(), dy.data(), x.data(), w.data(), rstd.data(), DType::kFloat32,
                              norm, dx.data(), dw.data(), nullptr)
                  .ok());
  RmsNormBackwardHost(dy.data(), x.data(), w.data(), rstd.data(), DType::kFloat32, norm, dx_ref.data(),
                      dw_ref.data());
  EXPECT_TRUE(SameBits(dx, dx_ref) && SameBits(dw, dw_ref));

  const std::vector<float> gate = Values(24, 0.2f), up = Values(24, 2.1f);
  std::vector<float> prod(24), prod_ref(24), dg(24), du(24), dg_ref(24), du_ref(24);
  ASSERT_TRUE(SwiGluForward(Place::Host(), gate.data(), up.data(), DType::kFloat32, 24, prod.data()).ok());
  SwiGluForwardHost(gate.data(), up.data(), DType::kFloat32, 24, prod_ref.data());
  EXPECT_TRUE(SameBits(prod, prod_ref));
  ASSERT_TRUE(SwiGluBackward(Place::Host(), dy.data(), gate.data(), up.data(), DType::kFloat32, 24, dg.data(),
                             du.data())
                  .ok());
  SwiGluBackwardHost(dy.data(), gate.data(), up.data(), DType::kFloat32, 24, dg_ref.data(), du_ref.data());
  EXPECT_TRUE(SameBits(dg, dg_ref) && SameBits(du, du_ref));
  EXPECT_FALSE(SameBits(dg, du)) << "the two gradients differ, so a swap would show";

  RopeShape rope;
  rope.batch = 1, rope.seq = 3, rope.heads = 1, rope.head_dim = 8;
  const std::vector<float> cos = Values(24, 0.5f), sin = Values(24, 0.9f);
  std::vector<float> r(24), r_ref(24), back(24), back_ref(24);
  ASSERT_TRUE(
      RopeForward(Place::Host(), x.data(), cos.data(), sin.data(), DType::kFloat32, rope, r.data()).ok());
  RopeForwardHost(x.data(), cos.data(), sin.data(), DType::kFloat32, rope, r_ref.data());
  EXPECT_TRUE(SameBits(r, r_ref));
  ASSERT_TRUE(
      RopeBackward(Place::Host(), dy.data(), cos.data(), sin.data(), DType::kFloat32, rope, back.data())
          .ok());
  RopeBackwardHost(dy.data(), cos.data(), sin.data(), DType::kFloat32, rope, back_ref.data());
  EXPECT_TRUE(SameBits(back, back_ref));
}

TEST(KernelDispatchTest, ACudaPlaceThatCannotLaunchIsAnErrorNamingTheKernel) {
  if (HaveCudaKernels() && device::CudaDeviceCount() > 0) {
    GTEST_SKIP() << "a GPU is visible: fused_kernels_gpu_test launches with device buffers";
  }
  const std::vector<float> x(24, 1.0f), w(8, 1.0f);
  std::vector<float> y(24), rstd(3);
  const absl::Status s = RmsNormForward(Place::Cuda(nullptr), x.data(), w.data(), DType::kFloat32,
                                        RmsNormShape{3, 8}, 1e-6f, y.data(), rstd.data());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("RMSNorm forward: "), std::string::npos) << s;
  if (HaveCudaKernels()) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << "CUDA's own error (no GPU here): " << s;
  } else {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("no CUDA kernels"), std::string::npos) << s;
  }
  EXPECT_EQ(y, std::vector<float>(24, 0.0f)) << "nothing ran in the CUDA place's stead";
}

}  // namespace
}  // namespace zerofit::kernels
