// CRC32C: the Castagnoli CRC (reflected polynomial 0x82F63B78, initial value and final
// xor 0xFFFFFFFF), the checksum of TFRecord files (TensorBoard event files) and of
// checkpoint manifests (pipeline/checkpoint_manifest.h) among others. masked_crc32c is
// TFRecord's stored form: a CRC of data that itself holds CRCs is weak, so the stored
// value is rotated right by 15 bits and offset by 0xa282ead8.
// On x86-64 CPUs with SSE4.2 the CRC instruction computes it (several GB/s, so
// checksumming a checkpoint costs little next to writing it); elsewhere a table does.
// Pure functions of the bytes; endianness-independent; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace aspen {

// crc32c("123456789") == 0xE3069283 (the check value of the CRC catalogue).
uint32_t crc32c(std::string_view bytes);

// The CRC of data read in pieces: crc32c_extend(crc32c(a), b) == crc32c(a + b), and
// crc32c_extend(0, b) == crc32c(b). For files streamed in chunks.
uint32_t crc32c_extend(uint32_t crc, std::string_view bytes);

// ((crc >> 15) | (crc << 17)) + 0xa282ead8 of crc32c(bytes).
uint32_t masked_crc32c(std::string_view bytes);

}  // namespace aspen
