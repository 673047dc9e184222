#include "offload/pinned_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace zerofit::offload {
namespace {

TEST(PinnedBufferTest, AllocatesZeroedAlignedMemoryAndReportsPinning) {
  auto b = PinnedBuffer::Allocate(5 << 20);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->bytes(), 5u << 20);
  const auto* p = b->as<uint8_t>();
  for (size_t i = 0; i < b->bytes(); i += 4093) ASSERT_EQ(p[i], 0);
  if (b->kind() == PinnedBuffer::Kind::kMlocked || b->kind() == PinnedBuffer::Kind::kPageable) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % PinnedBuffer::kAlignment, 0u);
  }
  // Either pinned, or pageable with the reason spelled out; never silently unpinned.
  if (b->pinned()) {
    EXPECT_TRUE(b->pin_status().ok());
  } else {
    EXPECT_EQ(b->kind(), PinnedBuffer::Kind::kPageable);
    EXPECT_NE(b->pin_status().message().find("mlock"), std::string::npos) << b->pin_status();
  }
  std::printf("pinned via %s (%s)\n", PinnedKindName(b->kind()), b->pin_status().ToString().c_str());
}

TEST(PinnedBufferTest, MovesOwnership) {
  auto b = PinnedBuffer::Allocate(4096);
  ASSERT_TRUE(b.ok());
  void* data = b->data();
  PinnedBuffer moved = std::move(*b);
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(b->data(), nullptr);
  EXPECT_EQ(b->kind(), PinnedBuffer::Kind::kNone);
  PinnedBuffer other;
  other = std::move(moved);
  EXPECT_EQ(other.data(), data);
  auto empty = PinnedBuffer::Allocate(0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data(), nullptr);
}

}  // namespace
}  // namespace zerofit::offload
