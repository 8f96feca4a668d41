#include "aspen/reward/format_verifier.h"

#include <cctype>

#include "aspen/reward/answer_extraction.h"
#include "aspen/reward/imports.h"
#include "aspen/reward/json_options.h"
#include "aspen/util/error.h"
#include "aspen/util/strings.h"

namespace aspen::reward {
namespace {

size_t skip_spaces(const std::string& text, size_t pos) {
  while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  return pos;
}

}  // namespace

FormatVerifier::FormatVerifier(const nlohmann::json& json) {
  JsonOptions reader(json, "verifier options (format)");
  std::string mode = reader.string("mode", "tags");
  check_input(mode == "tags" || mode == "regex", "unknown mode \"" + mode + "\"",
              reader.path("mode"), "use \"tags\" or \"regex\"");
  tags_ = reader.strings("tags", {"think", "answer"});
  allow_trailing_text_ = reader.boolean("allow_trailing_text", false);
  std::string pattern = reader.string("pattern", "");
  max_chars_ = reader.integer("max_chars", max_chars_);
  correct_score_ = reader.number("correct_score", correct_score_);
  wrong_score_ = reader.number("wrong_score", wrong_score_);
  reader.check_no_unknown_keys();

  if (mode == "tags") {
    check_input(!tags_.empty(), "tags mode needs at least one tag", reader.path("tags"));
    for (const std::string& tag : tags_) {
      check_input(!tag.empty() && tag.find_first_of("<>/ ") == std::string::npos,
                  "bad tag name \"" + tag + "\"", reader.path("tags"),
                  "give bare names such as \"think\"");
    }
    return;
  }
  check_input(!pattern.empty(), "regex mode needs a pattern", reader.path("pattern"));
  try {
    pattern_.emplace(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw Error(std::string("pattern does not compile: ") + e.what(), reader.path("pattern"));
  }
}

bool FormatVerifier::tags_match(const std::string& prompt, const std::string& response) const {
  std::string text = response;
  std::string first_open = "<" + tags_[0] + ">";
  if (ends_with(trim_ascii(prompt), first_open)) text = first_open + text;

  size_t pos = skip_spaces(text, 0);
  for (size_t i = 0; i < tags_.size(); ++i) {
    std::string open = "<" + tags_[i] + ">";
    std::string close = "</" + tags_[i] + ">";
    if (text.compare(pos, open.size(), open) != 0) return false;
    size_t content = pos + open.size();
    size_t end = text.find(close, content);
    if (end == std::string::npos) return false;
    // No tag of the structure may appear inside a content (a second <answer> in <think>
    // would make "the answer" ambiguous).
    for (const std::string& tag : tags_) {
      for (const std::string& marker : {"<" + tag + ">", "</" + tag + ">"}) {
        size_t at = text.find(marker, content);
        if (at != std::string::npos && at < end) return false;
      }
    }
    pos = skip_spaces(text, end + close.size());
  }
  if (allow_trailing_text_) return true;
  return pos == text.size();
}

double FormatVerifier::score(const RewardInput& input) const {
  if (!pattern_) return tags_match(input.prompt, input.response) ? correct_score_ : wrong_score_;
  if (static_cast<int64_t>(input.response.size()) > max_chars_) return wrong_score_;
  try {
    return std::regex_match(input.response, *pattern_) ? correct_score_ : wrong_score_;
  } catch (const std::regex_error&) {
    // Complexity/stack limits inside the engine: the response is not gradable as formatted.
    return wrong_score_;
  }
}

}  // namespace aspen::reward
