// WeightDelta: what turns one published weight set into the next, exactly, in fewer
// bytes than the next set itself (pipeline.weight_sync: delta, docs/design.md).
//
// Coding, per tensor: the XOR of the old and the new tensor's bytes, its bytes grouped
// by their position in the element (every element's lowest byte, then every second
// byte, ...; "byte planes"), compressed with zstd. Why XOR and not a sparse index of
// the changed elements: after an fp32 AdamW step at lr 1e-6 almost every element moves
// by a few hundred ULPs, so an index of changed elements costs more than the tensor
// (8 bytes per fp32 element); but the move touches the low mantissa bytes only, so the
// XOR's high planes are zeros and its low planes carry just the changed bits, which
// zstd keeps at about their entropy (docs/benchmarks.md, "Delta weight sync"). Planes
// are coded in frames of kDeltaFrameElements elements, each on its own, so encoding and
// decoding run in parallel over frames (at::parallel_for: torch's intra-op threads).
// A tensor whose coded frames are not smaller than its bytes is sent raw (kRaw).
//
// Exactness: XOR is its own inverse on the bits, so applying the delta to the exact
// bytes of version from_version gives the exact bytes of to_version (torch::equal),
// whatever the values (NaNs, signed zeros, subnormals included).
// Errors: apply_weight_delta throws aspen::Error when the held tensors do not match the
// delta (a name missing, another byte size) or a payload is corrupt.
// Thread safety: the functions share nothing; a WeightDelta is immutable once built.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aspen/dock/imports.h"
#include "aspen/parallel/weight_set.h"

namespace aspen::dock {

// Elements per independently coded frame (8 MiB of fp32): the unit of parallelism.
inline constexpr int64_t kDeltaFrameElements = int64_t{1} << 21;
// zstd's fastest regular level: at 2.4 GB per publish compression speed is the cost.
inline constexpr int kDefaultDeltaZstdLevel = 1;

enum class DeltaCoding : uint8_t {
  kXorZstd = 1,  // zstd frames of the XOR's byte planes, one per kDeltaFrameElements
  kRaw = 2,      // the new tensor's bytes as they are
};

struct TensorDelta {
  std::string name;
  DeltaCoding coding = DeltaCoding::kXorZstd;
  torch::Tensor payload;  // uint8, 1-D, contiguous, on the CPU
};

struct WeightDelta {
  int64_t from_version = 0;
  int64_t to_version = 0;
  std::vector<TensorDelta> tensors;  // one per tensor of the new set, in its order

  // The payloads' bytes: what the delta moves (the names and headers are not counted,
  // as WeightSet::bytes() does not count them).
  int64_t bytes() const;
};

// The delta from `from` to `to`; nullopt when the sets do not hold the same tensors
// (names in the same order, shapes, dtypes): then only the full set can follow.
std::optional<WeightDelta> encode_weight_delta(const WeightSet& from, const WeightSet& to,
                                               int zstd_level = kDefaultDeltaZstdLevel);

// Version delta.to_version's set, from `held` (version delta.from_version's tensors by
// name; any device, contiguous or not): new CPU tensors of the held ones' dtypes and
// shapes, in the delta's order.
std::shared_ptr<WeightSet> apply_weight_delta(const WeightDelta& delta,
                                              const std::map<std::string, torch::Tensor>& held);

// What a holder of one version fetches to reach the newest (WeightBoard::update): the
// newest set itself (`full`), or the deltas from its version on, in order; neither when
// it holds the newest already.
struct WeightUpdate {
  std::shared_ptr<const WeightSet> full;
  std::vector<std::shared_ptr<const WeightDelta>> deltas;

  bool empty() const { return full == nullptr && deltas.empty(); }
  // The version it leads to; -1 when empty.
  int64_t version() const;
  // The bytes it moves (payloads).
  int64_t bytes() const;
};

// The newest set from `update` for a holder whose tensors (of the version the deltas
// start from) are `held`: update.full itself, or the deltas applied in turn. Null when
// the update is empty.
std::shared_ptr<const WeightSet> apply_weight_update(
    const WeightUpdate& update, const std::map<std::string, torch::Tensor>& held);

}  // namespace aspen::dock
