#include "aspen/io/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "aspen/io/imports.h"
#include "aspen/io/strict_json.h"
#include "aspen/util/error.h"

namespace aspen::io {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kMetadataKey = "__metadata__";

std::map<std::string, std::string> parse_metadata(const Json& value, const std::string& source) {
  if (!value.is_object()) {
    throw Error("__metadata__ must be an object mapping strings to strings", source);
  }
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      throw Error(
          "__metadata__ value for \"" + key + "\" is " + item.type_name() + ", must be a string",
          source);
    }
    metadata.emplace(key, item.get<std::string>());
  }
  return metadata;
}

// A JSON non-negative integer as u64. nlohmann stores non-negative integers as
// unsigned and negatives as signed; anything past u64 becomes a float.
uint64_t parse_unsigned(const Json& value, const std::string& what, const std::string& source) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer()) throw Error(what + " is negative", source);
  throw Error(what + " must be a non-negative integer, got " + std::string(value.type_name()),
              source);
}

SafetensorsEntry parse_entry(const std::string& name, const Json& value,
                             const std::string& source) {
  const std::string where = "tensor \"" + name + "\"";
  if (!value.is_object()) throw Error(where + " must be an object", source);
  // Unknown fields are ignored, as the reference does, so newer writers stay readable.
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(key)) throw Error(where + " is missing \"" + key + "\"", source);
  }

  SafetensorsEntry entry;
  entry.name = name;
  const Json& dtype = value.at("dtype");
  if (!dtype.is_string()) throw Error(where + " dtype must be a string", source);
  entry.dtype = find_safetensors_dtype(dtype.get<std::string>());
  if (entry.dtype == nullptr) {
    throw Error(where + " has unknown dtype \"" + dtype.get<std::string>() + "\"", source);
  }

  const Json& shape = value.at("shape");
  if (!shape.is_array()) throw Error(where + " shape must be an array", source);
  uint64_t numel = 1;
  for (const Json& dim_json : shape) {
    const uint64_t dim = parse_unsigned(dim_json, where + " shape dimension", source);
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, dim, &numel)) {
      throw Error(where + " shape overflows the element count", source);
    }
    entry.shape.push_back(static_cast<int64_t>(dim));
  }

  const Json& offsets = value.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    throw Error(where + " data_offsets must be an array [begin, end]", source);
  }
  entry.begin = parse_unsigned(offsets[0], where + " data_offsets begin", source);
  entry.end = parse_unsigned(offsets[1], where + " data_offsets end", source);
  if (entry.end < entry.begin) {
    throw Error(where + " data_offsets end " + std::to_string(entry.end) + " < begin " +
                    std::to_string(entry.begin),
                source);
  }

  uint64_t bits = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(entry.dtype->bits), &bits)) {
    throw Error(where + " byte size overflows", source);
  }
  if (bits % 8 != 0) {
    throw Error(where + " of " + entry.dtype->name + " does not fill whole bytes", source);
  }
  if (bits / 8 != entry.end - entry.begin) {
    throw Error(where + " byte size mismatch: " + entry.dtype->name + " x shape needs " +
                    std::to_string(bits / 8) + " bytes, data_offsets span " +
                    std::to_string(entry.end - entry.begin),
                source);
  }
  return entry;
}

// The reference requires the data buffer to be exactly the concatenation of the
// tensors: anything else hides bytes (holes) or aliases tensors (overlap).
void check_tiling(const std::vector<SafetensorsEntry>& tensors, uint64_t buffer_size,
                  const std::string& source) {
  uint64_t expected = 0;
  for (const SafetensorsEntry& entry : tensors) {
    if (entry.end > buffer_size) {
      throw Error("tensor \"" + entry.name + "\" data_offsets end " + std::to_string(entry.end) +
                      " is past the data buffer (" + std::to_string(buffer_size) + " bytes)",
                  source);
    }
    if (entry.begin < expected) {
      throw Error("tensor \"" + entry.name + "\" data_offsets overlap the previous tensor", source);
    }
    if (entry.begin > expected) {
      throw Error("hole in the data buffer before tensor \"" + entry.name + "\" (bytes " +
                      std::to_string(expected) + ".." + std::to_string(entry.begin) + ")",
                  source);
    }
    expected = entry.end;
  }
  if (expected != buffer_size) {
    throw Error("tensors cover " + std::to_string(expected) + " bytes of a " +
                    std::to_string(buffer_size) + "-byte data buffer",
                source, "the data offsets must tile the whole buffer");
  }
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const char* data, uint64_t size, uint64_t buffer_size,
                                           const std::string& source) {
  const Json document = parse_strict_json(std::string(data, size), source);
  if (!document.is_object()) throw Error("header is not a JSON object", source);

  SafetensorsHeader header;
  for (const auto& [key, value] : document.items()) {
    if (key == kMetadataKey) {
      header.metadata = parse_metadata(value, source);
    } else {
      header.tensors.push_back(parse_entry(key, value, source));
    }
  }
  // Stable, so empty tensors sharing an offset stay in the order the file lists them.
  std::stable_sort(header.tensors.begin(), header.tensors.end(),
                   [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  check_tiling(header.tensors, buffer_size, source);
  return header;
}

std::string serialize_safetensors_header(const std::vector<SafetensorsEntry>& tensors,
                                         const std::map<std::string, std::string>& metadata) {
  // Built by hand rather than by dumping a json object: the key order must be
  // ours (nlohmann sorts keys) to match the reference byte for byte.
  auto quoted = [](const std::string& s) { return nlohmann::json(s).dump(); };
  std::string out = "{";
  bool first = true;
  if (!metadata.empty()) {
    out += quoted(kMetadataKey) + ":{";
    for (const auto& [key, value] : metadata) {
      if (!first) out += ',';
      first = false;
      out += quoted(key) + ":" + quoted(value);
    }
    out += "}";
  }
  first = metadata.empty();
  for (const SafetensorsEntry& entry : tensors) {
    TORCH_CHECK(entry.dtype != nullptr, "safetensors entry without dtype: ", entry.name);
    if (!first) out += ',';
    first = false;
    out += quoted(entry.name) + ":{\"dtype\":" + quoted(entry.dtype->name) + ",\"shape\":[";
    for (size_t i = 0; i < entry.shape.size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string(entry.shape[i]);
    }
    out += "],\"data_offsets\":[" + std::to_string(entry.begin) + "," + std::to_string(entry.end) +
           "]}";
  }
  out += "}";
  out.append((8 - out.size() % 8) % 8, ' ');
  return out;
}

}  // namespace aspen::io
