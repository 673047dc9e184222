#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "device/device.h"
#include "device/host/host_device.h"

namespace zerofit::device {
namespace {

TEST(HostMemoryTest, PinnedMemoryIsZeroedAlignedAndSaysWhyItIsNotLocked) {
  auto b = AllocateHostMemory(5 << 20, MemoryKind::kPinned);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->bytes(), 5u << 20);
  EXPECT_EQ(b->kind(), MemoryKind::kPinned);
  const auto* p = b->as<unsigned char>();
  for (size_t i = 0; i < b->bytes(); i += 4096) ASSERT_EQ(p[i], 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % 64, 0u);
  if (b->pin_status().ok()) {
    EXPECT_EQ(b->pinned_bytes(), b->bytes());
  } else {
    EXPECT_EQ(b->pinned_bytes(), 0u);
    EXPECT_NE(b->pin_status().message().find("mlock"), std::string::npos) << b->pin_status();
  }
}

TEST(HostMemoryTest, BuffersMoveOwnershipAndEmptyIsEmpty) {
  auto b = AllocateHostMemory(4096, MemoryKind::kPageable);
  ASSERT_TRUE(b.ok());
  void* data = b->data();
  Buffer moved = std::move(*b);
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(b->data(), nullptr);
  EXPECT_TRUE(b->empty());
  Buffer other;
  other = std::move(moved);
  EXPECT_EQ(other.data(), data);
  auto empty = AllocateHostMemory(0, MemoryKind::kPinned);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(HostMemoryTest, DeviceMemoryIsCountedUntilReleased) {
  HostDevice device;
  {
    auto a = device.Allocate(1000, MemoryKind::kDevice);
    auto b = device.Allocate(24, MemoryKind::kDevice);
    auto host = device.Allocate(4096, MemoryKind::kPinned);  // not device memory
    ASSERT_TRUE(a.ok() && b.ok() && host.ok());
    EXPECT_EQ(device.memory_stats().allocated_bytes, 1024u);
  }
  EXPECT_EQ(device.memory_stats().allocated_bytes, 0u);
  EXPECT_EQ(device.memory_stats().peak_allocated_bytes, 1024u);
}

}  // namespace
}  // namespace zerofit::device
