#include "bench/dock_soak_rows.h"

#include <cstring>

#include "bench/imports.h"

namespace aspen::bench {
namespace {

constexpr uint64_t kSoakGolden = 0x9E3779B97F4A7C15ull;

uint64_t soak_mix(uint64_t x) {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t soak_word(uint64_t base, size_t i) {
  return base + static_cast<uint64_t>(i) * kSoakGolden;
}

}  // namespace

int64_t soak_row_key(int64_t incarnation, int64_t sequence) {
  return (incarnation << 32) | (sequence & 0xFFFFFFFFll);
}

int64_t soak_row_bytes(int64_t key, uint64_t seed, int64_t max_row_bytes) {
  const uint64_t h = soak_mix(static_cast<uint64_t>(key) ^ soak_mix(seed));
  return 1 + static_cast<int64_t>(h % static_cast<uint64_t>(max_row_bytes));
}

torch::Tensor soak_row_data(int64_t key, uint64_t seed, int64_t max_row_bytes) {
  const int64_t bytes = soak_row_bytes(key, seed, max_row_bytes);
  torch::Tensor data = torch::empty({bytes}, torch::kUInt8);
  auto* out = data.data_ptr<uint8_t>();
  const uint64_t base = soak_mix(static_cast<uint64_t>(key) + seed);
  const size_t words = static_cast<size_t>(bytes) / 8;
  for (size_t i = 0; i < words; ++i) {
    const uint64_t w = soak_word(base, i);
    std::memcpy(out + 8 * i, &w, 8);
  }
  const uint64_t tail = soak_word(base, words);
  std::memcpy(out + 8 * words, &tail, static_cast<size_t>(bytes) % 8);
  return data;
}

std::string soak_row_mismatch(const torch::Tensor& data, int64_t key, uint64_t seed,
                              int64_t max_row_bytes) {
  const int64_t bytes = soak_row_bytes(key, seed, max_row_bytes);
  if (!data.defined() || data.scalar_type() != torch::kUInt8 || data.dim() != 1 ||
      !data.is_contiguous()) {
    return "not a contiguous uint8 vector";
  }
  if (data.numel() != bytes) {
    return std::to_string(data.numel()) + " bytes, expected " + std::to_string(bytes);
  }
  const auto* in = data.data_ptr<uint8_t>();
  const uint64_t base = soak_mix(static_cast<uint64_t>(key) + seed);
  const size_t words = static_cast<size_t>(bytes) / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w;
    std::memcpy(&w, in + 8 * i, 8);
    if (w != soak_word(base, i)) return "wrong bytes at offset " + std::to_string(8 * i);
  }
  const uint64_t tail = soak_word(base, words);
  if (std::memcmp(in + 8 * words, &tail, static_cast<size_t>(bytes) % 8) != 0) {
    return "wrong tail bytes";
  }
  return "";
}

}  // namespace aspen::bench
