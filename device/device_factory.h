// The one place that names the device implementations: host, CUDA (when built with CUDA and a GPU is
// visible) and the test device.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "device/device.h"
#include "device/test/test_device.h"

namespace zerofit::device {

// auto: cuda:<index> when this build has CUDA and that GPU is visible, else the host.
enum class DeviceChoice { kAuto, kCpu, kCuda, kTest };

struct DeviceOptions {
  DeviceChoice choice = DeviceChoice::kAuto;
  int index = 0;  // CUDA device ordinal (the rank's local rank)
  TestDeviceOptions test;
};

// "auto", "cpu", "cuda", "test" (InvalidArgument naming the accepted values otherwise).
absl::StatusOr<DeviceChoice> ParseDeviceChoice(std::string_view text);
const char* DeviceChoiceName(DeviceChoice choice);
// CUDA devices visible to this process (0 in builds without CUDA).
int CudaDeviceCount();
// kCuda without a usable GPU is an error naming why; kAuto falls back to the host.
absl::StatusOr<std::unique_ptr<Device>> CreateDevice(const DeviceOptions& options);

}  // namespace zerofit::device
