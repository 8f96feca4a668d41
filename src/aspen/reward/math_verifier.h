// MathVerifier: 1/0 reward for a final math answer (GSM8K, MATH, arithmetic drills).
// The answer is extracted from the response (answer_extraction.h), both it and the ground
// truth are normalised (answer_normalizer.h), and they match when both parse as numbers
// within tolerance, or else when the normalised strings are equal.
//
// Ground truth: a JSON number, a string (itself run through extraction first when it
// contains \boxed or "####", so a raw GSM8K solution works), or an array of such
// alternatives (any one matching scores as correct).
//
// Options (JSON, all optional):
//   extract         "auto" | "boxed" | "hash" | "plain"           (default "auto")
//   answer_phrase   also accept "answer is X" / "Answer: X"       (default false)
//   strip_percent   "50\%" == "50"                                (default true)
//   strip_units     "12 cm" == "12"                               (default false)
//   rel_tol, abs_tol  numeric tolerance                           (default 1e-6, 1e-9)
//   correct_score, wrong_score, no_answer_score                   (default 1, 0, 0)
// no_answer_score applies when nothing could be extracted: set it below wrong_score (e.g.
// -1) to punish a missing \boxed harder than a wrong one.
// Thread safety: immutable; score() may run concurrently. score() throws aspen::Error only
// for a ground truth of the wrong JSON type.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "aspen/reward/answer_extraction.h"
#include "aspen/reward/answer_normalizer.h"
#include "aspen/reward/imports.h"
#include "aspen/reward/verifier.h"

namespace aspen::reward {

struct MathVerifierOptions {
  AnswerExtraction extract = AnswerExtraction::kAuto;
  bool answer_phrase = false;
  AnswerNormalization normalization;
  double rel_tol = 1e-6;
  double abs_tol = 1e-9;
  double correct_score = 1.0;
  double wrong_score = 0.0;
  double no_answer_score = 0.0;

  // Strict parse of the JSON options above; errors name "verifier options (math).<key>".
  static MathVerifierOptions from_json(const nlohmann::json& options);
};

class MathVerifier : public Verifier {
 public:
  explicit MathVerifier(MathVerifierOptions options = {}) : options_(options) {}

  std::string name() const override { return "math"; }
  double score(const RewardInput& input) const override;

  // The answer score() would grade, before normalisation; nullopt when none is found.
  std::optional<std::string> extract(const std::string& response) const;
  // True when two raw answers are equal after normalisation (numerically or as strings).
  bool answers_match(const std::string& given, const std::string& expected) const;

 private:
  MathVerifierOptions options_;
};

}  // namespace aspen::reward
