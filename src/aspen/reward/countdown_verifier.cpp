#include "aspen/reward/countdown_verifier.h"

#include <algorithm>
#include <vector>

#include "aspen/reward/answer_extraction.h"
#include "aspen/reward/arithmetic_expression.h"
#include "aspen/reward/imports.h"
#include "aspen/reward/json_options.h"
#include "aspen/util/error.h"

namespace aspen::reward {
namespace {

bool is_bare_integer(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](char c) { return (c >= '0' && c <= '9') || c == '-'; });
}

struct CountdownTruth {
  int64_t target = 0;
  std::vector<int64_t> numbers;
};

CountdownTruth read_truth(const nlohmann::json& truth) {
  const std::string where = "reward ground_truth (countdown)";
  check_input(truth.is_object() && truth.contains("target") && truth.contains("numbers"),
              "expected {\"target\": int, \"numbers\": [int]}, got " + json_for_message(truth),
              where);
  const nlohmann::json& target = truth.at("target");
  const nlohmann::json& numbers = truth.at("numbers");
  check_input(target.is_number_integer(),
              "target must be an integer, got " + json_for_message(target), where);
  check_input(numbers.is_array() && !numbers.empty(),
              "numbers must be a non-empty array, got " + json_for_message(numbers), where);
  CountdownTruth out;
  out.target = target.get<int64_t>();
  for (const nlohmann::json& n : numbers) {
    check_input(n.is_number_integer() && n.get<int64_t>() >= 0,
                "numbers must be non-negative integers, got " + json_for_message(numbers), where);
    out.numbers.push_back(n.get<int64_t>());
  }
  return out;
}

}  // namespace

CountdownVerifier::CountdownVerifier(const nlohmann::json& json) {
  JsonOptions reader(json, "verifier options (countdown)");
  correct_score_ = reader.number("correct_score", correct_score_);
  format_score_ = reader.number("format_score", format_score_);
  wrong_numbers_score_ = reader.number("wrong_numbers_score", wrong_numbers_score_);
  require_answer_tag_ = reader.boolean("require_answer_tag", require_answer_tag_);
  reader.check_no_unknown_keys();
}

std::optional<std::string> CountdownVerifier::extract_equation(const std::string& response) const {
  std::string line;
  size_t open = response.rfind("<answer>");
  if (open != std::string::npos) {
    size_t begin = open + 8;
    size_t close = response.find("</answer>", begin);
    if (close == std::string::npos) return std::nullopt;
    line = trim_ascii(std::string_view(response).substr(begin, close - begin));
  } else {
    if (require_answer_tag_) return std::nullopt;
    size_t end = response.size();
    while (end > 0) {
      size_t start = response.rfind('\n', end - 1);
      start = (start == std::string::npos) ? 0 : start + 1;
      line = trim_ascii(std::string_view(response).substr(start, end - start));
      if (!line.empty() || start == 0) break;
      end = start - 1;
    }
  }
  while (!line.empty() && line.back() == '.') line.pop_back();
  size_t eq = line.find('=');
  if (eq != std::string::npos) {
    if (line.find('=', eq + 1) != std::string::npos) return std::nullopt;
    std::string left = trim_ascii(line.substr(0, eq));
    std::string right = trim_ascii(line.substr(eq + 1));
    if (is_bare_integer(right)) {
      line = left;
    } else if (is_bare_integer(left)) {
      line = right;
    } else {
      return std::nullopt;
    }
  }
  if (line.empty()) return std::nullopt;
  return line;
}

double CountdownVerifier::score(const RewardInput& input) const {
  CountdownTruth truth = read_truth(input.ground_truth);
  std::optional<std::string> equation = extract_equation(input.response);
  if (!equation) return 0.0;
  ParsedExpression parsed = parse_arithmetic_expression(*equation);
  if (!parsed.well_formed) return 0.0;

  std::vector<int64_t> used = parsed.literals;
  std::vector<int64_t> given = truth.numbers;
  std::sort(used.begin(), used.end());
  std::sort(given.begin(), given.end());
  if (used != given) return wrong_numbers_score_;
  if (parsed.value && *parsed.value == Rational(truth.target)) return correct_score_;
  return format_score_;
}

}  // namespace aspen::reward
