// The factory's choices where no GPU is visible (label unit; on a GPU machine the cuda cases check the
// opposite): auto falls back to the host, an explicit cuda request is an error that says why.
#include "device/device_factory.h"

#include <gtest/gtest.h>

namespace zerofit::device {
namespace {

TEST(DeviceFactory, ParsesEveryChoiceAndRejectsOthers) {
  for (const char* name : {"auto", "cpu", "cuda", "test"}) {
    auto c = ParseDeviceChoice(name);
    ASSERT_TRUE(c.ok()) << name;
    EXPECT_STREQ(DeviceChoiceName(*c), name);
  }
  auto bad = ParseDeviceChoice("gpu");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("auto, cpu, cuda, test"), std::string::npos);
}

TEST(DeviceFactory, AutoIsCudaWhenAGpuIsVisibleElseTheHost) {
  auto d = CreateDevice({});
  ASSERT_TRUE(d.ok()) << d.status();
  if (CudaDeviceCount() > 0) {
    EXPECT_EQ((*d)->kind(), DeviceKind::kCuda);
    EXPECT_EQ((*d)->name(), "cuda:0");
    EXPECT_FALSE((*d)->device_memory_is_host());
  } else {
    EXPECT_EQ((*d)->kind(), DeviceKind::kHost);
  }
}

TEST(DeviceFactory, CudaWithoutThatGpuIsAnErrorThatSaysWhy) {
  DeviceOptions options;
  options.choice = DeviceChoice::kCuda;
  options.index = CudaDeviceCount();  // one past the last visible GPU (0 when there is none)
  auto d = CreateDevice(options);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition) << d.status();
  EXPECT_NE(d.status().message().find("cuda"), std::string::npos) << d.status();
}

}  // namespace
}  // namespace zerofit::device
