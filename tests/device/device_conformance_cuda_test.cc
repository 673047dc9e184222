// The conformance suite on cuda:0 (label gpu); every test skips when no GPU is visible.
#include "tests/device/device_conformance.h"

namespace zerofit::device {

INSTANTIATE_TEST_SUITE_P(Gpu, DeviceConformance, ::testing::Values("cuda"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace zerofit::device
