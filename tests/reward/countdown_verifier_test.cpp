// Countdown grading: exact arithmetic, the number-multiset rule and equation extraction.
#include "aspen/reward/countdown_verifier.h"

#include <gtest/gtest.h>

#include "aspen/reward/arithmetic_expression.h"
#include "aspen/util/error.h"

namespace aspen::reward {
namespace {

const nlohmann::json kTruth = {{"target", 24}, {"numbers", {4, 6, 1}}};

double grade_countdown(const std::string& response, const nlohmann::json& truth = kTruth,
             const nlohmann::json& options = nlohmann::json::object()) {
  return CountdownVerifier(options).score({"", response, truth});
}

TEST(ArithmeticExpression, PrecedenceAndParentheses) {
  EXPECT_EQ(parse_arithmetic_expression("2+3*4").value, Rational(14));
  EXPECT_EQ(parse_arithmetic_expression("(2+3)*4").value, Rational(20));
  EXPECT_EQ(parse_arithmetic_expression("8-3-2").value, Rational(3));
  EXPECT_EQ(parse_arithmetic_expression("8/4/2").value, Rational(1));
  EXPECT_EQ(parse_arithmetic_expression(" ( 7 / 3 ) * 3 ").value, Rational(7));
  EXPECT_EQ(parse_arithmetic_expression("1/3").value, Rational::make(1, 3));
  ParsedExpression parsed = parse_arithmetic_expression("(10 - 4) * 25");
  EXPECT_EQ(parsed.literals, (std::vector<int64_t>{10, 4, 25}));
}

TEST(ArithmeticExpression, MalformedInputs) {
  for (const char* text : {"", "2+", "-3+5", "2**3", "2^3", "3.5+1", "(2+3", "2+3)", "2 3", "x+1",
                           "2+3=5", "()", "99999999999999999999+1"}) {
    ParsedExpression parsed = parse_arithmetic_expression(text);
    EXPECT_FALSE(parsed.well_formed) << text;
    EXPECT_FALSE(parsed.value.has_value()) << text;
  }
  EXPECT_FALSE(
      parse_arithmetic_expression(std::string(100, '(') + "1" + std::string(100, ')')).well_formed);
  EXPECT_FALSE(parse_arithmetic_expression(std::string(5000, '1')).well_formed);
}

TEST(ArithmeticExpression, DivisionByZeroAndOverflowAreWellFormedWithoutValue) {
  ParsedExpression zero = parse_arithmetic_expression("5/(3-3)");
  EXPECT_TRUE(zero.well_formed);
  EXPECT_FALSE(zero.value.has_value());
  ParsedExpression huge =
      parse_arithmetic_expression("999999999999999999*999999999999999999*999999999999999999");
  EXPECT_TRUE(huge.well_formed);
  EXPECT_FALSE(huge.value.has_value());
}

TEST(CountdownVerifier, CorrectEquationsScoreOne) {
  EXPECT_EQ(grade_countdown("4*6*1"), 1.0);
  EXPECT_EQ(grade_countdown("(6 - 1 - 1) * 6"), 0.0);  // 1 and 6 used twice, 4 unused
  EXPECT_EQ(grade_countdown("<think>try</think><answer>6*4/1</answer>"), 1.0);
  EXPECT_EQ(grade_countdown("some reasoning\n6*4*1 = 24\n"), 1.0);
  EXPECT_EQ(grade_countdown("24 = 1*6*4."), 1.0);
  // A fraction on the way that still lands on the target is exact.
  EXPECT_EQ(grade_countdown("(7/3)*3", {{"target", 7}, {"numbers", {7, 3, 3}}}), 1.0);
  EXPECT_EQ(grade_countdown("6/(1-3/4)", {{"target", 24}, {"numbers", {6, 1, 3, 4}}}), 1.0);
}

TEST(CountdownVerifier, RuleBreakingScoresZero) {
  EXPECT_EQ(grade_countdown("4*6*1*1"), 0.0);  // 1 used twice
  EXPECT_EQ(grade_countdown("4*6"), 0.0);      // 1 unused
  EXPECT_EQ(grade_countdown("4*6*1+0"), 0.0);  // foreign number
  EXPECT_EQ(grade_countdown("4*6*1.0"), 0.0);  // decimal
  EXPECT_EQ(grade_countdown("4x6x1"), 0.0);    // invalid characters
  EXPECT_EQ(grade_countdown("-4*-6*1"), 0.0);  // unary minus
  EXPECT_EQ(grade_countdown("I cannot do it"), 0.0);
  EXPECT_EQ(grade_countdown(""), 0.0);
  EXPECT_EQ(grade_countdown("<answer>4*6*1"), 0.0);  // unclosed tag
  EXPECT_EQ(grade_countdown("4*6 = 1*24"), 0.0);     // two expressions
}

TEST(CountdownVerifier, WellFormedButWrongGetsFormatScore) {
  EXPECT_DOUBLE_EQ(grade_countdown("4+6+1"), 0.1);
  EXPECT_DOUBLE_EQ(grade_countdown("4/(1-1)*6", {{"target", 24}, {"numbers", {4, 1, 1, 6}}}), 0.1);
  EXPECT_DOUBLE_EQ(grade_countdown("4+6+1", kTruth, {{"format_score", 0.0}}), 0.0);
  EXPECT_DOUBLE_EQ(grade_countdown("4*6*1*1", kTruth, {{"wrong_numbers_score", 0.05}}), 0.05);
}

TEST(CountdownVerifier, LastAnswerTagWinsAndCanBeRequired) {
  EXPECT_EQ(grade_countdown("<answer>4+6+1</answer> oops <answer>4*6*1</answer>"), 1.0);
  EXPECT_EQ(grade_countdown("4*6*1", kTruth, {{"require_answer_tag", true}}), 0.0);
  EXPECT_EQ(grade_countdown("<answer>4*6*1</answer>", kTruth, {{"require_answer_tag", true}}), 1.0);
}

TEST(CountdownVerifier, BadGroundTruthOrOptionsAreErrors) {
  EXPECT_THROW(grade_countdown("1", {{"target", 24}}), Error);
  EXPECT_THROW(grade_countdown("1", {{"target", "24"}, {"numbers", {1}}}), Error);
  EXPECT_THROW(grade_countdown("1", {{"target", 24}, {"numbers", {1.5}}}), Error);
  EXPECT_THROW(CountdownVerifier(nlohmann::json{{"format", 0.1}}), Error);
}

// Fuzzer finding (fuzz/reward_answer_fuzz.cpp): a ground truth string that is not valid
// UTF-8 made the error message's json::dump() throw json::type_error instead of the
// verifier's aspen::Error.
TEST(CountdownVerifier, InvalidUtf8GroundTruthIsAnAspenError) {
  const CountdownVerifier verifier;
  const nlohmann::json truth = std::string("24 \xFF");
  EXPECT_THROW(verifier.score({"", "<answer>1+2</answer>", truth}), Error);
  const nlohmann::json numbers = {{"target", 24}, {"numbers", {1, std::string("\xFF")}}};
  EXPECT_THROW(verifier.score({"", "<answer>1+2</answer>", numbers}), Error);
}

}  // namespace
}  // namespace aspen::reward
