#include "aspen/io/hf_head.h"

#include "aspen/io/imports.h"
#include "aspen/io/strict_json.h"
#include "aspen/util/error.h"
#include "aspen/util/file.h"

namespace aspen::io {
namespace {

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

HfHeadConfig parse_hf_head(const std::string& json_text, const std::string& source) {
  const nlohmann::ordered_json root = parse_strict_json(json_text, source);
  check_input(root.is_object(), "config.json must be a JSON object", source);
  HfHeadConfig out;
  if (root.contains("architectures") && root["architectures"].is_array() &&
      !root["architectures"].empty() && root["architectures"][0].is_string() &&
      ends_with(root["architectures"][0].get<std::string>(), "ForSequenceClassification")) {
    out.head = HfHead::kSequenceClassification;
  }
  if (root.contains("pad_token_id") && !root["pad_token_id"].is_null()) {
    check_input(root["pad_token_id"].is_number_integer() && root["pad_token_id"].get<int64_t>() >= 0,
                "must be a non-negative integer or null", source + ": pad_token_id");
    out.pad_token_id = root["pad_token_id"].get<int64_t>();
  }
  if (out.head != HfHead::kSequenceClassification) return out;
  out.num_labels = 2;
  if (root.contains("num_labels")) {
    check_input(root["num_labels"].is_number_integer(), "must be an integer",
                source + ": num_labels");
    out.num_labels = root["num_labels"].get<int64_t>();
  } else if (root.contains("id2label")) {
    check_input(root["id2label"].is_object(), "must be an object", source + ": id2label");
    out.num_labels = static_cast<int64_t>(root["id2label"].size());
  }
  check_input(out.num_labels >= 1 && out.num_labels <= 1 << 16,
              "must be in [1, 65536], got " + std::to_string(out.num_labels),
              source + ": num_labels");
  return out;
}

HfHeadConfig load_hf_head(const std::string& config_path) {
  return parse_hf_head(read_file(config_path), config_path);
}

}  // namespace aspen::io
