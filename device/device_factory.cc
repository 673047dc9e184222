#include "device/device_factory.h"

#include "absl/strings/str_cat.h"
#include "device/host/host_device.h"
#ifdef ZEROFIT_HAVE_CUDA_DEVICE
#include "device/cuda/cuda_device.h"
#endif

namespace zerofit::device {

const char* DeviceKindName(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kHost:
      return "host";
    case DeviceKind::kCuda:
      return "cuda";
    case DeviceKind::kTest:
      return "test";
  }
  return "unknown";
}

const char* DeviceChoiceName(DeviceChoice choice) {
  switch (choice) {
    case DeviceChoice::kAuto:
      return "auto";
    case DeviceChoice::kCpu:
      return "cpu";
    case DeviceChoice::kCuda:
      return "cuda";
    case DeviceChoice::kTest:
      return "test";
  }
  return "unknown";
}

absl::StatusOr<DeviceChoice> ParseDeviceChoice(std::string_view text) {
  for (DeviceChoice c : {DeviceChoice::kAuto, DeviceChoice::kCpu, DeviceChoice::kCuda, DeviceChoice::kTest}) {
    if (text == DeviceChoiceName(c)) return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("device '", std::string(text), "' is not one of auto, cpu, cuda, test"));
}

int CudaDeviceCount() {
#ifdef ZEROFIT_HAVE_CUDA_DEVICE
  return CudaVisibleDevices();
#else
  return 0;
#endif
}

absl::StatusOr<std::unique_ptr<Device>> CreateDevice(const DeviceOptions& options) {
  switch (options.choice) {
    case DeviceChoice::kCpu:
      return std::unique_ptr<Device>(std::make_unique<HostDevice>());
    case DeviceChoice::kTest:
      return std::unique_ptr<Device>(std::make_unique<TestDevice>(options.test));
    case DeviceChoice::kAuto:
      if (CudaDeviceCount() <= options.index) return std::unique_ptr<Device>(std::make_unique<HostDevice>());
      [[fallthrough]];
    case DeviceChoice::kCuda:
#ifdef ZEROFIT_HAVE_CUDA_DEVICE
      return CreateCudaDevice(options.index);
#else
      return absl::FailedPreconditionError(
          "device cuda: this zerofit was built without CUDA (configure with a CUDA toolkit and "
          "-DZEROFIT_WITH_CUDA=ON)");
#endif
  }
  return absl::InvalidArgumentError("unknown device choice");
}

}  // namespace zerofit::device
