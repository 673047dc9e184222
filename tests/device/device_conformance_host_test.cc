// The conformance suite on the devices that need no GPU (label unit).
#include "tests/device/device_conformance.h"

namespace zerofit::device {

INSTANTIATE_TEST_SUITE_P(NoGpu, DeviceConformance, ::testing::Values("cpu", "test"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace zerofit::device
