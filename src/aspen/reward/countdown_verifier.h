// CountdownVerifier: reward for the Countdown game (TinyZero): combine the given numbers,
// each exactly once, with + - * / and parentheses to reach the target.
//
// Ground truth: {"target": int, "numbers": [int, ...]} (other keys, such as a reference
// "solution", are ignored).
// Equation extraction: the content of the last <answer>...</answer> when the response has
// one; otherwise (unless "require_answer_tag") the last non-empty line. Either may be
// written "expr", "expr = 56" or "56 = expr": the side that is a bare integer is the claim
// and is ignored, the other side is graded. A trailing '.' is dropped.
// Grading, with exact rational arithmetic (arithmetic_expression.h):
//   correct_score (1.0)   well-formed, the literals are exactly the given numbers as a
//                         multiset, and the value equals the target (fractions along the
//                         way are fine: 7/3*3 == 7);
//   format_score  (0.1)   well-formed, the right numbers, but a different value (or a
//                         division by zero);
//   wrong_numbers_score (0.0)  well-formed but a number missing, repeated or foreign;
//   0                     no equation, or a malformed one.
// TinyZero also pays format_score for wrong numbers; here that is a separate knob
// defaulting to 0, because paying for ignoring the rules teaches the policy to ignore them.
// Thread safety: immutable; score() may run concurrently. score() throws aspen::Error only
// for a malformed ground truth.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "aspen/reward/imports.h"
#include "aspen/reward/verifier.h"

namespace aspen::reward {

class CountdownVerifier : public Verifier {
 public:
  // Options: correct_score, format_score, wrong_numbers_score, require_answer_tag.
  explicit CountdownVerifier(const nlohmann::json& options = nlohmann::json::object());

  std::string name() const override { return "countdown"; }
  double score(const RewardInput& input) const override;

  // The expression text score() would grade, or nullopt when there is none.
  std::optional<std::string> extract_equation(const std::string& response) const;

 private:
  double correct_score_ = 1.0;
  double format_score_ = 0.1;
  double wrong_numbers_score_ = 0.0;
  bool require_answer_tag_ = false;
};

}  // namespace aspen::reward
