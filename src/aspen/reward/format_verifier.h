// FormatVerifier: 1/0 reward for the shape of a response, independent of correctness
// (R1-style "<think>...</think><answer>...</answer>").
//
// Modes (option "mode"):
//   "tags"  (default) - the response is exactly the tags listed in "tags" (default
//           ["think", "answer"]), in order, each once as <tag>content</tag>, separated only
//           by whitespace, with no tag of the list nested inside a content. Text after the
//           last tag is allowed only with "allow_trailing_text": true. When the prompt ends
//           with the first opening tag (an R1-Zero prompt that ends in "<think>"), the
//           response is checked as its continuation. Hand-written scanning: linear time on
//           any response length.
//   "regex" - "pattern" (ECMAScript, std::regex) must match the whole response. libstdc++'s
//           regex engine recurses per character, so responses longer than "max_chars"
//           (default 20000) score wrong_score rather than risk a stack overflow.
// Scores: correct_score (default 1) when the shape matches, wrong_score (default 0) else.
// Thread safety: immutable; score() may run concurrently (std::regex matching is const).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "aspen/reward/imports.h"
#include "aspen/reward/verifier.h"

namespace aspen::reward {

class FormatVerifier : public Verifier {
 public:
  // Throws aspen::Error naming the key for unknown options, an empty tag list or a pattern
  // that does not compile.
  explicit FormatVerifier(const nlohmann::json& options = nlohmann::json::object());

  std::string name() const override { return "format"; }
  double score(const RewardInput& input) const override;

 private:
  bool tags_match(const std::string& prompt, const std::string& response) const;

  std::vector<std::string> tags_;
  bool allow_trailing_text_ = false;
  std::optional<std::regex> pattern_;
  int64_t max_chars_ = 20000;
  double correct_score_ = 1.0;
  double wrong_score_ = 0.0;
};

}  // namespace aspen::reward
