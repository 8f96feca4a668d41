#include "aspen/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "aspen/tokenizer/imports.h"
#include "aspen/util/error.h"

namespace aspen::tokenizer {
namespace {

// True when NFC cannot change `text`: no code point at or above U+0300. Every such
// code point is its own NFC form and none of them combines with a neighbour (the
// combining marks start at U+0300), which covers ASCII and Latin-1 prose cheaply.
bool trivially_nfc(std::string_view text) {
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0xCC) return false;  // 0xCC 0x80 is U+0300; lower leads encode < U+0300.
  }
  return true;
}

void add_step(const nlohmann::json& spec, const std::string& source, bool* nfc) {
  if (spec.is_null()) return;
  if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
    throw Error("normalizer is not an object with a \"type\"", source + ": normalizer");
  }
  const std::string type = spec["type"].get<std::string>();
  if (type == "NFC") {
    *nfc = true;
  } else if (type == "Sequence") {
    for (const auto& step : spec.value("normalizers", nlohmann::json::array())) {
      add_step(step, source, nfc);
    }
  } else {
    throw Error("unsupported normalizer type \"" + type + "\"", source + ": normalizer",
                "supported: null, NFC, Sequence of NFC");
  }
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& spec, const std::string& source) {
  Normalizer n;
  add_step(spec, source, &n.nfc_);
  return n;
}

std::string_view Normalizer::apply(std::string_view text, std::string& scratch) const {
  if (!nfc_ || trivially_nfc(text)) return text;
  scratch = to_nfc(text);
  return scratch;
}

std::string to_nfc(std::string_view text) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) {
    throw Error(std::string("NFC normalisation failed: ") + utf8proc_errmsg(n), "tokenizer input");
  }
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

}  // namespace aspen::tokenizer
