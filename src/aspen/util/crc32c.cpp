#include "aspen/util/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define ASPEN_CRC32C_SSE42 1
#endif

namespace aspen {
namespace {

// One table of the 256 byte remainders, built once: bitwise CRC per byte is 8x
// slower and event files are written on every iteration (small, but no reason to pay).
std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    table[byte] = crc;
  }
  return table;
}

// `state` is the running register (before the final xor).
uint32_t update_with_table(uint32_t state, std::string_view bytes) {
  static const std::array<uint32_t, 256> table = make_crc32c_table();
  for (const char c : bytes) {
    state = table[(state ^ static_cast<uint8_t>(c)) & 0xFFu] ^ (state >> 8);
  }
  return state;
}

#ifdef ASPEN_CRC32C_SSE42
// The SSE4.2 CRC32 instruction is CRC32C; 8 bytes at a time (little-endian loads give
// the reflected CRC's byte order). Compiled for SSE4.2 here only, used after the CPU
// says it has it, so the binary still runs on older x86-64.
__attribute__((target("sse4.2"))) uint32_t update_with_instruction(uint32_t state,
                                                                   std::string_view bytes) {
  const char* p = bytes.data();
  size_t n = bytes.size();
  uint64_t wide = state;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    wide = _mm_crc32_u64(wide, word);
  }
  state = static_cast<uint32_t>(wide);
  for (; n > 0; ++p, --n) state = _mm_crc32_u8(state, static_cast<uint8_t>(*p));
  return state;
}

bool cpu_has_sse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t crc32c_extend(uint32_t crc, std::string_view bytes) {
  const uint32_t state = crc ^ 0xFFFFFFFFu;
#ifdef ASPEN_CRC32C_SSE42
  if (cpu_has_sse42()) return update_with_instruction(state, bytes) ^ 0xFFFFFFFFu;
#endif
  return update_with_table(state, bytes) ^ 0xFFFFFFFFu;
}

uint32_t crc32c(std::string_view bytes) {
  return crc32c_extend(0, bytes);
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t crc = crc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace aspen
