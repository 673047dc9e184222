// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord framing uses it, and TensorFlow's mask
// of a stored CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zerofit::worker::metrics {

uint32_t Crc32c(const void* data, size_t bytes);
uint32_t MaskCrc32c(uint32_t crc);

}  // namespace zerofit::worker::metrics
