#include "aspen/reward/math_verifier.h"

#include <cmath>
#include <cstdio>

#include "aspen/reward/imports.h"
#include "aspen/reward/json_options.h"
#include "aspen/util/error.h"

namespace aspen::reward {
namespace {

// Ground-truth alternative as answer text: numbers printed exactly (integers without ".0").
std::string ground_truth_text(const nlohmann::json& value) {
  if (value.is_number_integer()) return value.dump();
  if (value.is_number()) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.17g", value.get<double>());
    return buffer;
  }
  check_input(value.is_string(),
              "math ground truth must be a string, a number or an array of them, got " +
                  json_for_message(value),
              "reward ground_truth");
  std::string text = value.get<std::string>();
  // A full worked solution ("... #### 72") is graded by its final answer.
  if (text.find("\\boxed") != std::string::npos || text.find("\\fbox") != std::string::npos ||
      text.find("####") != std::string::npos) {
    if (std::optional<std::string> answer = extract_answer(text, AnswerExtraction::kAuto, false)) {
      return *answer;
    }
  }
  return text;
}

}  // namespace

MathVerifierOptions MathVerifierOptions::from_json(const nlohmann::json& json) {
  JsonOptions reader(json, "verifier options (math)");
  MathVerifierOptions options;
  options.extract =
      parse_answer_extraction(reader.string("extract", "auto"), reader.path("extract"));
  options.answer_phrase = reader.boolean("answer_phrase", options.answer_phrase);
  options.normalization.strip_percent =
      reader.boolean("strip_percent", options.normalization.strip_percent);
  options.normalization.strip_units =
      reader.boolean("strip_units", options.normalization.strip_units);
  options.rel_tol = reader.number("rel_tol", options.rel_tol);
  options.abs_tol = reader.number("abs_tol", options.abs_tol);
  check_input(options.rel_tol >= 0 && options.abs_tol >= 0, "tolerances must be >= 0",
              reader.path("rel_tol"));
  options.correct_score = reader.number("correct_score", options.correct_score);
  options.wrong_score = reader.number("wrong_score", options.wrong_score);
  options.no_answer_score = reader.number("no_answer_score", options.no_answer_score);
  reader.check_no_unknown_keys();
  return options;
}

std::optional<std::string> MathVerifier::extract(const std::string& response) const {
  return extract_answer(response, options_.extract, options_.answer_phrase);
}

bool MathVerifier::answers_match(const std::string& given, const std::string& expected) const {
  std::string a = normalize_answer(given, options_.normalization);
  std::string b = normalize_answer(expected, options_.normalization);
  std::optional<double> x = parse_number(a);
  std::optional<double> y = parse_number(b);
  if (x && y) return numbers_close(*x, *y, options_.rel_tol, options_.abs_tol);
  return !a.empty() && a == b;
}

double MathVerifier::score(const RewardInput& input) const {
  std::vector<std::string> expected;
  if (input.ground_truth.is_array()) {
    for (const nlohmann::json& item : input.ground_truth)
      expected.push_back(ground_truth_text(item));
  } else {
    expected.push_back(ground_truth_text(input.ground_truth));
  }
  check_input(!expected.empty(), "math ground truth is an empty array", "reward ground_truth");

  std::optional<std::string> answer = extract(input.response);
  if (!answer) return options_.no_answer_score;
  for (const std::string& truth : expected) {
    if (answers_match(*answer, truth)) return options_.correct_score;
  }
  return options_.wrong_score;
}

}  // namespace aspen::reward
