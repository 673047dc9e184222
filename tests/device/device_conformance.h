// The conformance suite every device::Device passes (host, test device, CUDA): copies between every kind
// of memory, fill, the kernels against their host references, event ordering between streams, host
// functions (order, errors) and Synchronize deadlines. Each test binary instantiates it for the devices it
// covers: device_unit_test for "host" and "test" (label unit), device_gpu_test for "cuda" (label gpu; it
// skips cleanly when no GPU is visible).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "device/device.h"

namespace zerofit::device {

class DeviceConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // A device buffer holding `v` (copied in on stream_ and synchronised).
  template <typename T>
  Buffer Upload(const std::vector<T>& v) {
    absl::StatusOr<Buffer> b = device_->Allocate(v.size() * sizeof(T), MemoryKind::kDevice);
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) return Buffer();
    if (!v.empty()) {
      EXPECT_TRUE(stream_->Copy(b->data(), v.data(), v.size() * sizeof(T)).ok());
    }
    Sync();
    return std::move(*b);
  }
  // The first n elements of device buffer `b`.
  template <typename T>
  std::vector<T> Download(const Buffer& b, size_t n) {
    std::vector<T> out(n);
    if (n > 0) {
      EXPECT_TRUE(stream_->Copy(out.data(), b.data(), n * sizeof(T)).ok());
    }
    Sync();
    return out;
  }
  void Sync() { ASSERT_TRUE(stream_->Synchronize(absl::Seconds(60)).ok()) << stream_->status(); }

  std::unique_ptr<Device> device_;
  std::unique_ptr<Stream> stream_;
};

}  // namespace zerofit::device
