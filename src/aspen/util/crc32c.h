// CRC32C: the Castagnoli CRC (reflected polynomial 0x82F63B78, initial value and final
// xor 0xFFFFFFFF), the checksum of TFRecord files (TensorBoard event files) among
// others. masked_crc32c is TFRecord's stored form: a CRC of data that itself holds
// CRCs is weak, so the stored value is rotated right by 15 bits and offset by
// 0xa282ead8.
// Pure functions of the bytes; endianness-independent.
#pragma once

#include <cstdint>
#include <string_view>

namespace aspen {

// crc32c("123456789") == 0xE3069283 (the check value of the CRC catalogue).
uint32_t crc32c(std::string_view bytes);

// ((crc >> 15) | (crc << 17)) + 0xa282ead8 of crc32c(bytes).
uint32_t masked_crc32c(std::string_view bytes);

}  // namespace aspen
