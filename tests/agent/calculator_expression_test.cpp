// The calculator's language (agent/calculator_expression.h): exact values, Python's
// precedence and floor semantics, and every failure as an error value. Random
// expressions are checked against Python itself over fractions.Fraction
// (tools/python/calculator_oracle.py), which is the language's definition.
#include "aspen/agent/calculator_expression.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "support/oracles.h"

namespace aspen::agent {
namespace {

std::string calculated(const std::string& expression) {
  const CalculatorResult result = evaluate_calculator_expression(expression);
  EXPECT_TRUE(result.value.has_value()) << expression << ": " << result.error;
  EXPECT_EQ(result.value.has_value(), result.error.empty());
  return result.value.value_or("");
}

std::string calculation_error(const std::string& expression, const CalculatorLimits& limits = {}) {
  const CalculatorResult result = evaluate_calculator_expression(expression, limits);
  EXPECT_FALSE(result.value.has_value()) << expression << " = " << result.value.value_or("");
  return result.error;
}

TEST(CalculatorExpressionTest, FollowsPythonPrecedenceAndFloorSemantics) {
  EXPECT_EQ(calculated("1 + 2 * 3"), "7");
  EXPECT_EQ(calculated("(1 + 2) * 3"), "9");
  EXPECT_EQ(calculated("-2**2"), "-4");
  EXPECT_EQ(calculated("(-2)**2"), "4");
  EXPECT_EQ(calculated("2**3**2"), "512");
  EXPECT_EQ(calculated("2**-2"), "1/4");
  EXPECT_EQ(calculated("--3 - -3"), "6");
  EXPECT_EQ(calculated("-7 // 2"), "-4");
  EXPECT_EQ(calculated("-7 % 2"), "1");
  EXPECT_EQ(calculated("7 % -2"), "-1");
  EXPECT_EQ(calculated("7 / 2"), "7/2");
  EXPECT_EQ(calculated("-6 / 4"), "-3/2");
  EXPECT_EQ(calculated("6 / 3"), "2");
  EXPECT_EQ(calculated("(7/2) // (1/3)"), "10");
  EXPECT_EQ(calculated("(7/2) % (1/3)"), "1/6");
  EXPECT_EQ(calculated("0**0"), "1");
  EXPECT_EQ(calculated("(-1)**1000000000000000000000001"), "-1");
  EXPECT_EQ(calculated(" \t12\n"), "12");
}

TEST(CalculatorExpressionTest, BigIntegersAreExact) {
  EXPECT_EQ(calculated("123456789012345678901234567890 * 987654321098765432109876543210"),
            "121932631137021795226185032733622923332237463801111263526900");
  const std::string two_to_1000 = calculated("2**1000");
  EXPECT_EQ(two_to_1000.size(), 302u);
  EXPECT_EQ(two_to_1000.substr(0, 20), "10715086071862673209");
  EXPECT_EQ(two_to_1000.substr(282), "24386837205668069376");
  EXPECT_EQ(calculated("(10**200 + 7) // (10**100 + 3)"), std::string(99, '9') + "7");
  EXPECT_EQ(calculated("(10**200 + 7) % (10**100 + 3)"), "16");
  EXPECT_EQ(calculated("2**1000 - 2**1000 + 1"), "1");
}

TEST(CalculatorExpressionTest, FailuresAreErrorValuesThatSayWhatIsWrong) {
  EXPECT_EQ(calculation_error("1/0"), "division by zero");
  EXPECT_EQ(calculation_error("1//(2-2)"), "division by zero");
  EXPECT_EQ(calculation_error("5 % 0"), "division by zero");
  EXPECT_EQ(calculation_error("0**-1"), "division by zero");
  EXPECT_EQ(calculation_error(""), "empty expression");
  EXPECT_EQ(calculation_error("   "), "empty expression");
  EXPECT_EQ(calculation_error("2^3"),
            "unexpected character '^' at position 1 (use ** for powers): "
            "expected an operator");
  EXPECT_NE(calculation_error("1.5 * 2").find("only integers are supported"), std::string::npos);
  EXPECT_NE(calculation_error("1e5").find("only integers are supported"), std::string::npos);
  EXPECT_EQ(calculation_error("(1 + 2"), "expected ')' but found end of expression");
  EXPECT_EQ(calculation_error("1 + 2)"), "unmatched ')' at position 5");
  EXPECT_EQ(calculation_error("1 +"), "expected a number or '(' but found end of expression");
  EXPECT_EQ(calculation_error("x + 1"),
            "expected a number or '(' but found character 'x' at position 0");
  EXPECT_EQ(calculation_error("2 ** (1/2)"), "the exponent of ** must be an integer");
  EXPECT_EQ(calculation_error("x = 1").substr(0, 9), "expected ");
  EXPECT_EQ(calculation_error("1 = 1"),
            "unexpected character '=' at position 2 (give the expression only): "
            "expected an operator");
}

TEST(CalculatorExpressionTest, SizesDepthAndTimeAreBounded) {
  EXPECT_EQ(calculation_error("10**20000"), "result too large (more than 10000 digits)");
  EXPECT_EQ(calculation_error("3**100000000000000000000000000"),
            "result too large (more than 10000 digits)");
  EXPECT_EQ(calculation_error("(10**5000) * (10**5001)"),
            "result too large (more than 10000 digits)");
  EXPECT_EQ(calculation_error("1/(10**10001)"), "result too large (more than 10000 digits)");
  CalculatorLimits ten_digits;
  ten_digits.max_digits = 10;
  EXPECT_EQ(calculation_error("12345678901", ten_digits), "number too large (more than 10 digits)");
  EXPECT_EQ(calculation_error("99999 * 999999", ten_digits),
            "result too large (more than 10 digits)");
  EXPECT_EQ(calculation_error(std::string(200, '(') + "1" + std::string(200, ')')),
            "expression nested deeper than 100 levels");
  EXPECT_EQ(calculation_error(std::string(200, '-') + "1"),
            "expression nested deeper than 100 levels");
  EXPECT_EQ(calculation_error("2**" + std::string(200, '-') + "1"),
            "expression nested deeper than 100 levels");
  EXPECT_EQ(calculation_error(std::string(10001, ' ')), "expression longer than 10000 characters");
  // A million-deep input is refused by its length before anything recurses.
  EXPECT_FALSE(evaluate_calculator_expression(std::string(1'000'000, '(')).value.has_value());
  CalculatorLimits no_time;
  no_time.max_seconds = 0;
  EXPECT_EQ(calculation_error("1 + 1", no_time), "evaluation took longer than 0 s");
  // Exactly at the bounds is fine.
  EXPECT_EQ(calculated("10**9999").size(), 10000u);
  EXPECT_EQ(calculated(std::string(99, '(') + "1" + std::string(99, ')')), "1");
}

// Random expressions: big literals, every operator, parentheses, unary minus, small and
// negative exponents; Python over Fractions evaluates the same text.
TEST(CalculatorExpressionTest, AgreesWithPythonFractionsOnRandomExpressions) {
  std::mt19937_64 rng(35);
  const auto literal = [&] {
    std::string digits(1 + rng() % (rng() % 4 == 0 ? 120 : 6), '0');
    for (char& d : digits) d = static_cast<char>('0' + rng() % 10);
    // Python refuses leading zeros ("007"); the calculator reads them as decimal.
    if (digits.size() > 1 && digits[0] == '0') digits[0] = '1';
    return digits;
  };
  const char* const kOps[] = {" + ", " - ", " * ", " / ", " // ", " % "};
  std::function<std::string(int)> expression = [&](int depth) -> std::string {
    const int kind = depth >= 4 ? 0 : static_cast<int>(rng() % 5);
    if (kind == 0) return literal();
    if (kind == 1) return "-" + expression(depth + 1);
    if (kind == 2) return "(" + expression(depth + 1) + ")";
    if (kind == 3) {
      // A small exponent, maybe negative; the base is parenthesised like any operand.
      return "(" + expression(depth + 1) + ")**" + std::to_string(static_cast<int>(rng() % 7) - 2);
    }
    return expression(depth + 1) + kOps[rng() % 6] + expression(depth + 1);
  };
  std::vector<std::string> expressions;
  for (int i = 0; i < 400; ++i) expressions.push_back(expression(0));
  const auto input = std::filesystem::temp_directory_path() / "aspen_calculator_oracle_in.txt";
  {
    std::ofstream out(input);
    for (const std::string& e : expressions) out << e << "\n";
  }
  const std::string command = testing::python() + " " +
                              testing::oracle_script("calculator_oracle.py") + " < " +
                              input.string();
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[65536];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  ASSERT_EQ(pclose(pipe), 0) << "the oracle failed: " << command;
  std::istringstream lines(output);
  size_t checked = 0;
  size_t errors = 0;
  for (std::string expected; std::getline(lines, expected); ++checked) {
    ASSERT_LT(checked, expressions.size());
    const CalculatorResult result = evaluate_calculator_expression(expressions[checked]);
    const std::string got = result.value ? *result.value : "error: " + result.error;
    if (!result.value) ++errors;
    EXPECT_EQ(got, expected) << expressions[checked];
  }
  EXPECT_EQ(checked, expressions.size());
  // The mix exercises both outcomes, and mostly values.
  EXPECT_GT(errors, 0u);
  EXPECT_LT(errors, expressions.size() / 4);
}

}  // namespace
}  // namespace aspen::agent
