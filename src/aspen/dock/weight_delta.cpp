#include "aspen/dock/weight_delta.h"

#include <ATen/Parallel.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "aspen/dock/imports.h"
#include "aspen/util/error.h"

namespace aspen::dock {
namespace {

const char* const kDeltaWhere = "weight delta";

struct CctxDeleter {
  void operator()(ZSTD_CCtx* ctx) const { ZSTD_freeCCtx(ctx); }
};
struct DctxDeleter {
  void operator()(ZSTD_DCtx* ctx) const { ZSTD_freeDCtx(ctx); }
};

int64_t tensor_byte_size(const torch::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

const uint8_t* data_bytes(const torch::Tensor& t) {
  return static_cast<const uint8_t*>(t.data_ptr());
}

torch::Tensor on_cpu_contiguous(const torch::Tensor& t) { return t.to(torch::kCPU).contiguous(); }

// planes[p * count + i] = a[i * width + p] ^ b[i * width + p]: the XOR of `count`
// elements of `width` bytes, byte p of every element together.
void xor_to_planes(const uint8_t* a, const uint8_t* b, int64_t count, int64_t width,
                   uint8_t* planes) {
  if (width == 4) {
    for (int64_t i = 0; i < count; ++i) {
      uint32_t x, y;
      std::memcpy(&x, a + 4 * i, 4);
      std::memcpy(&y, b + 4 * i, 4);
      x ^= y;
      planes[i] = static_cast<uint8_t>(x);
      planes[count + i] = static_cast<uint8_t>(x >> 8);
      planes[2 * count + i] = static_cast<uint8_t>(x >> 16);
      planes[3 * count + i] = static_cast<uint8_t>(x >> 24);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t p = 0; p < width; ++p) planes[p * count + i] = a[i * width + p] ^ b[i * width + p];
  }
}

// The inverse: out[i * width + p] = held[i * width + p] ^ planes[p * count + i].
void planes_xor_into(const uint8_t* planes, const uint8_t* held, int64_t count, int64_t width,
                     uint8_t* out) {
  if (width == 4) {
    for (int64_t i = 0; i < count; ++i) {
      uint32_t x;
      std::memcpy(&x, held + 4 * i, 4);
      x ^= static_cast<uint32_t>(planes[i]) | static_cast<uint32_t>(planes[count + i]) << 8 |
           static_cast<uint32_t>(planes[2 * count + i]) << 16 |
           static_cast<uint32_t>(planes[3 * count + i]) << 24;
      std::memcpy(out + 4 * i, &x, 4);
    }
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t p = 0; p < width; ++p) out[i * width + p] = held[i * width + p] ^ planes[p * count + i];
  }
}

// One frame: elements [begin, end) of tensor `tensor`.
struct DeltaFrame {
  size_t tensor = 0;
  int64_t begin = 0;
  int64_t end = 0;
  size_t offset = 0;  // decoding: where its zstd frame starts in the payload
  size_t size = 0;    // decoding: the zstd frame's size
};

std::vector<DeltaFrame> delta_frames_of(size_t tensor, int64_t numel) {
  std::vector<DeltaFrame> frames;
  for (int64_t begin = 0; begin < numel; begin += kDeltaFrameElements) {
    frames.push_back(DeltaFrame{tensor, begin, std::min(numel, begin + kDeltaFrameElements)});
  }
  return frames;
}

torch::Tensor raw_copy(const torch::Tensor& t) {
  torch::Tensor out = torch::empty({tensor_byte_size(t)}, torch::kUInt8);
  if (tensor_byte_size(t) > 0) std::memcpy(out.data_ptr(), t.data_ptr(), tensor_byte_size(t));
  return out;
}

}  // namespace

int64_t WeightDelta::bytes() const {
  int64_t total = 0;
  for (const TensorDelta& t : tensors) total += t.payload.numel();
  return total;
}

std::optional<WeightDelta> encode_weight_delta(const WeightSet& from, const WeightSet& to,
                                               int zstd_level) {
  if (from.tensors.size() != to.tensors.size()) return std::nullopt;
  std::vector<torch::Tensor> olds, news;
  std::vector<DeltaFrame> frames;
  for (size_t i = 0; i < to.tensors.size(); ++i) {
    const auto& [old_name, old_tensor] = from.tensors[i];
    const auto& [name, tensor] = to.tensors[i];
    if (old_name != name || old_tensor.sizes() != tensor.sizes() ||
        old_tensor.scalar_type() != tensor.scalar_type()) {
      return std::nullopt;
    }
    olds.push_back(on_cpu_contiguous(old_tensor));
    news.push_back(on_cpu_contiguous(tensor));
    for (const DeltaFrame& f : delta_frames_of(i, tensor.numel())) frames.push_back(f);
  }

  std::vector<std::string> coded(frames.size());
  at::parallel_for(0, static_cast<int64_t>(frames.size()), 1, [&](int64_t lo, int64_t hi) {
    std::unique_ptr<ZSTD_CCtx, CctxDeleter> ctx(ZSTD_createCCtx());
    std::vector<uint8_t> planes;
    for (int64_t u = lo; u < hi; ++u) {
      const DeltaFrame& f = frames[u];
      const int64_t width = news[f.tensor].element_size();
      const int64_t count = f.end - f.begin;
      planes.resize(count * width);
      xor_to_planes(data_bytes(olds[f.tensor]) + f.begin * width,
                    data_bytes(news[f.tensor]) + f.begin * width, count, width, planes.data());
      std::string& out = coded[u];
      out.resize(ZSTD_compressBound(planes.size()));
      const size_t n = ZSTD_compressCCtx(ctx.get(), out.data(), out.size(), planes.data(),
                                         planes.size(), zstd_level);
      check_input(!ZSTD_isError(n), std::string("zstd: ") + ZSTD_getErrorName(n), kDeltaWhere);
      out.resize(n);
    }
  });

  WeightDelta delta;
  delta.from_version = from.version;
  delta.to_version = to.version;
  size_t next = 0;
  for (size_t i = 0; i < to.tensors.size(); ++i) {
    size_t end = next;
    int64_t total = 0;
    while (end < frames.size() && frames[end].tensor == i) total += coded[end++].size();
    TensorDelta entry;
    entry.name = to.tensors[i].first;
    if (total >= tensor_byte_size(news[i])) {
      entry.coding = DeltaCoding::kRaw;
      entry.payload = raw_copy(news[i]);
    } else {
      entry.payload = torch::empty({total}, torch::kUInt8);
      auto* out = static_cast<char*>(entry.payload.data_ptr());
      for (size_t u = next; u < end; ++u) {
        std::memcpy(out, coded[u].data(), coded[u].size());
        out += coded[u].size();
      }
    }
    delta.tensors.push_back(std::move(entry));
    next = end;
  }
  return delta;
}

std::shared_ptr<WeightSet> apply_weight_delta(const WeightDelta& delta,
                                              const std::map<std::string, torch::Tensor>& held) {
  auto set = std::make_shared<WeightSet>();
  set->version = delta.to_version;
  std::vector<torch::Tensor> olds;
  std::vector<DeltaFrame> frames;
  for (size_t i = 0; i < delta.tensors.size(); ++i) {
    const TensorDelta& entry = delta.tensors[i];
    check_input(entry.payload.scalar_type() == torch::kUInt8 && entry.payload.dim() == 1 &&
                    entry.payload.is_contiguous() && entry.payload.device().is_cpu(),
                "the payload of '" + entry.name + "' is not a 1-D contiguous CPU uint8 tensor",
                kDeltaWhere);
    auto it = held.find(entry.name);
    check_input(it != held.end(),
                "the held weights lack '" + entry.name + "' (version " +
                    std::to_string(delta.from_version) + " -> " + std::to_string(delta.to_version) + ")",
                kDeltaWhere);
    olds.push_back(on_cpu_contiguous(it->second));
    set->tensors.emplace_back(entry.name, torch::empty_like(olds.back()));
    const int64_t bytes = tensor_byte_size(olds.back());
    const auto* payload = static_cast<const uint8_t*>(entry.payload.data_ptr());
    const size_t payload_size = static_cast<size_t>(entry.payload.numel());
    if (entry.coding == DeltaCoding::kRaw) {
      check_input(static_cast<int64_t>(payload_size) == bytes,
                  "raw '" + entry.name + "' has " + std::to_string(payload_size) +
                      " bytes, the held tensor " + std::to_string(bytes),
                  kDeltaWhere);
      if (bytes > 0) std::memcpy(set->tensors.back().second.data_ptr(), payload, payload_size);
      continue;
    }
    check_input(entry.coding == DeltaCoding::kXorZstd, "unknown coding of '" + entry.name + "'",
                kDeltaWhere);
    size_t offset = 0;
    for (DeltaFrame f : delta_frames_of(i, olds.back().numel())) {
      check_input(offset < payload_size, "'" + entry.name + "' has too few frames", kDeltaWhere);
      f.offset = offset;
      f.size = ZSTD_findFrameCompressedSize(payload + offset, payload_size - offset);
      check_input(!ZSTD_isError(f.size), "'" + entry.name + "': corrupt zstd frame", kDeltaWhere);
      offset += f.size;
      frames.push_back(f);
    }
    check_input(offset == payload_size, "'" + entry.name + "' has trailing bytes", kDeltaWhere);
  }

  at::parallel_for(0, static_cast<int64_t>(frames.size()), 1, [&](int64_t lo, int64_t hi) {
    std::unique_ptr<ZSTD_DCtx, DctxDeleter> ctx(ZSTD_createDCtx());
    std::vector<uint8_t> planes;
    for (int64_t u = lo; u < hi; ++u) {
      const DeltaFrame& f = frames[u];
      const TensorDelta& entry = delta.tensors[f.tensor];
      const int64_t width = olds[f.tensor].element_size();
      const int64_t count = f.end - f.begin;
      planes.resize(count * width);
      const size_t n =
          ZSTD_decompressDCtx(ctx.get(), planes.data(), planes.size(),
                              static_cast<const uint8_t*>(entry.payload.data_ptr()) + f.offset, f.size);
      check_input(!ZSTD_isError(n) && n == planes.size(),
                  "'" + entry.name + "': a frame does not decode to its elements", kDeltaWhere);
      planes_xor_into(planes.data(), data_bytes(olds[f.tensor]) + f.begin * width, count, width,
                      static_cast<uint8_t*>(set->tensors[f.tensor].second.data_ptr()) + f.begin * width);
    }
  });
  return set;
}

int64_t WeightUpdate::version() const {
  if (full != nullptr) return full->version;
  return deltas.empty() ? -1 : deltas.back()->to_version;
}

int64_t WeightUpdate::bytes() const {
  if (full != nullptr) return full->bytes();
  int64_t total = 0;
  for (const auto& delta : deltas) total += delta->bytes();
  return total;
}

std::shared_ptr<const WeightSet> apply_weight_update(
    const WeightUpdate& update, const std::map<std::string, torch::Tensor>& held) {
  if (update.full != nullptr) return update.full;
  std::shared_ptr<const WeightSet> current;
  for (const auto& delta : update.deltas) {
    current = current == nullptr
                  ? apply_weight_delta(*delta, held)
                  : apply_weight_delta(*delta, std::map<std::string, torch::Tensor>(
                                                   current->tensors.begin(), current->tensors.end()));
  }
  return current;
}

}  // namespace aspen::dock
