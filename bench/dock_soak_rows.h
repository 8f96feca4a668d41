// The rows of the dock soak (bench/dock_soak.h) carry their own proof of identity.
// A row is named by a key = (producer incarnation << 32) | sequence number, stored
// as RowInfo::group_id (group_size 1); its size in bytes, 1..max_row_bytes, and its
// content are functions of the key and the run's seed, so a consumer that knows
// only the RowInfo it claimed can check that the bytes a warehouse served are that
// row's: 64-bit words key_hash + i * golden, then the tail bytes of the next word.
// RowInfo::tokens holds the size too (a second witness, the controller's copy).
// Thread safety: pure functions.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "bench/imports.h"

namespace aspen::bench {

int64_t soak_row_key(int64_t incarnation, int64_t sequence);
int64_t soak_row_bytes(int64_t key, uint64_t seed, int64_t max_row_bytes);
// A uint8 tensor of soak_row_bytes(key, ...) bytes holding the row's pattern.
torch::Tensor soak_row_data(int64_t key, uint64_t seed, int64_t max_row_bytes);
// "" when `data` is exactly the row's bytes, else what is wrong (size or first bad
// offset), for the consumer's journal.
std::string soak_row_mismatch(const torch::Tensor& data, int64_t key, uint64_t seed,
                              int64_t max_row_bytes);

}  // namespace aspen::bench
