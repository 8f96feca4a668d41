#include "aspen/io/strict_json.h"

#include <cstdint>
#include <set>
#include <vector>

#include "aspen/io/imports.h"
#include "aspen/util/error.h"

namespace aspen::io {

bool is_valid_utf8(const char* data, std::size_t size) {
  const auto* s = reinterpret_cast<const unsigned char*>(data);
  std::size_t i = 0;
  while (i < size) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    uint32_t code = 0;
    uint32_t min_code = 0;
    if ((c & 0xE0) == 0xC0) {
      length = 2, code = c & 0x1F, min_code = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, code = c & 0x0F, min_code = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, code = c & 0x07, min_code = 0x10000;
    } else {
      return false;  // stray continuation byte or 0xF8..0xFF
    }
    if (size - i < length) return false;
    for (std::size_t k = 1; k < length; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      code = (code << 6) | (s[i + k] & 0x3F);
    }
    if (code < min_code || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += length;
  }
  return true;
}

nlohmann::ordered_json parse_strict_json(const std::string& text, const std::string& source) {
  if (!is_valid_utf8(text.data(), text.size())) throw Error("invalid UTF-8 in JSON", source);

  // One set of seen keys per open object; arrays do not hold keys, so they need no entry.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  bool found_duplicate = false;
  const nlohmann::ordered_json::parser_callback_t track_keys =
      [&](int /*depth*/, nlohmann::ordered_json::parse_event_t event,
          nlohmann::ordered_json& parsed) {
        using Event = nlohmann::ordered_json::parse_event_t;
        if (event == Event::object_start) {
          open_objects.emplace_back();
        } else if (event == Event::object_end) {
          if (!open_objects.empty()) open_objects.pop_back();
        } else if (event == Event::key && !open_objects.empty()) {
          const std::string& key = parsed.get_ref<const std::string&>();
          if (!open_objects.back().insert(key).second && !found_duplicate) {
            found_duplicate = true;
            duplicate = key;
          }
        }
        return true;
      };

  nlohmann::ordered_json document;
  try {
    document = nlohmann::ordered_json::parse(text, track_keys);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("invalid JSON: ") + e.what(), source);
  }
  if (found_duplicate) {
    throw Error("duplicate key \"" + duplicate + "\" in one JSON object", source,
                "each name may appear only once");
  }
  return document;
}

}  // namespace aspen::io
