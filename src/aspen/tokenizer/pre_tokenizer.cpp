#include "aspen/tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include "aspen/tokenizer/imports.h"
#include "aspen/util/error.h"

namespace aspen::tokenizer {
namespace {

// The split ByteLevel(use_regex=true) performs (HF byte_level.rs, from GPT-2).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Quotes `literal` so PCRE2 matches it verbatim (\Q...\E cannot hold "\E" itself).
std::string quote_literal(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

struct Builder {
  const std::string& source;
  std::vector<RegexSplitter> steps;
  bool byte_level_seen = false;

  void add(const nlohmann::json& spec, const std::string& where) {
    if (!spec.is_object() || !spec.contains("type") || !spec["type"].is_string()) {
      throw Error("pre-tokenizer is not an object with a \"type\"", source + ": " + where);
    }
    const std::string type = spec["type"].get<std::string>();
    if (byte_level_seen) {
      throw Error("pre-tokenizer \"" + type + "\" after ByteLevel is not supported",
                  source + ": " + where);
    }
    if (type == "Sequence") {
      const auto& list = spec.value("pretokenizers", nlohmann::json::array());
      for (size_t i = 0; i < list.size(); ++i) {
        add(list[i], where + ".pretokenizers[" + std::to_string(i) + "]");
      }
    } else if (type == "Split") {
      add_split(spec, where);
    } else if (type == "ByteLevel") {
      if (spec.value("add_prefix_space", false)) {
        throw Error("ByteLevel add_prefix_space=true is not supported", source + ": " + where);
      }
      if (spec.value("use_regex", true)) steps.emplace_back(kGpt2Pattern, source + ": " + where);
      byte_level_seen = true;
    } else {
      throw Error("unsupported pre-tokenizer type \"" + type + "\"", source + ": " + where,
                  "supported: Split (Isolated), ByteLevel, Sequence");
    }
  }

  void add_split(const nlohmann::json& spec, const std::string& where) {
    const std::string behavior = spec.value("behavior", "");
    if (behavior != "Isolated" || spec.value("invert", false)) {
      throw Error("Split behavior \"" + behavior + "\" (invert " +
                      (spec.value("invert", false) ? "true" : "false") + ") is not supported",
                  source + ": " + where, "supported: behavior Isolated, invert false");
    }
    const auto& pattern = spec.value("pattern", nlohmann::json::object());
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      steps.emplace_back(pattern["Regex"].get<std::string>(), source + ": " + where);
    } else if (pattern.contains("String") && pattern["String"].is_string()) {
      steps.emplace_back(quote_literal(pattern["String"].get<std::string>()),
                         source + ": " + where);
    } else {
      throw Error("Split pattern must be {\"Regex\": ...} or {\"String\": ...}",
                  source + ": " + where + ".pattern");
    }
  }
};

}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json& spec, const std::string& source) {
  Builder builder{source, {}, false};
  if (!spec.is_null()) builder.add(spec, "pre_tokenizer");
  if (!builder.byte_level_seen) {
    throw Error("pre-tokenizer has no ByteLevel step", source + ": pre_tokenizer",
                "only byte-level BPE tokenizers (GPT-2, Qwen) are supported");
  }
  PreTokenizer pre;
  pre.steps_ = std::move(builder.steps);
  return pre;
}

}  // namespace aspen::tokenizer
