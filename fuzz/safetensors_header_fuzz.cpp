// safetensors header parsing. Input: 8 bytes little-endian data-buffer size, then the
// header bytes. Checks: parse works or throws aspen::Error; a parsed header's entries
// tile [0, buffer) in order and survive serialize -> parse unchanged.
#include <cstring>

#include "aspen/io/safetensors_header.h"
#include "fuzz_common.h"

namespace {

bool same(const aspen::io::SafetensorsHeader& a, const aspen::io::SafetensorsHeader& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& x = a.tensors[i];
    const auto& y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.begin != y.begin ||
        x.end != y.end) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t buffer_size = 0;
  std::memcpy(&buffer_size, data, 8);
  const char* header = reinterpret_cast<const char*>(data + 8);
  ASPEN_FUZZ_CONTRACT({
    const aspen::io::SafetensorsHeader parsed =
        aspen::io::parse_safetensors_header(header, size - 8, buffer_size, "fuzz.safetensors");
    uint64_t offset = 0;
    for (const auto& entry : parsed.tensors) {
      aspen::fuzz::require(
          entry.dtype != nullptr && entry.begin == offset && entry.end >= entry.begin,
          "entries tile the buffer in order");
      offset = entry.end;
    }
    aspen::fuzz::require(offset == buffer_size, "entries cover the whole buffer");
    const std::string written =
        aspen::io::serialize_safetensors_header(parsed.tensors, parsed.metadata);
    aspen::fuzz::require(written.size() % 8 == 0, "serialized header is 8-byte aligned");
    aspen::io::SafetensorsHeader reparsed;
    try {
      reparsed = aspen::io::parse_safetensors_header(written.data(), written.size(), buffer_size,
                                                 "reserialized");
    } catch (const aspen::Error& e) {
      aspen::fuzz::defect(std::string("a serialized header does not parse: ") + e.what());
    }
    aspen::fuzz::require(same(parsed, reparsed), "serialize -> parse round trip");
  });
  return 0;
}
