#include "aspen/agent/calculator_expression.h"

#include <cctype>
#include <chrono>

#include "aspen/agent/big_rational.h"
#include "aspen/agent/imports.h"

namespace aspen::agent {
namespace {

// Thrown inside the evaluator only, caught at its entry: a recursive descent parser
// unwinds most simply by exception, and nothing outside ever sees one.
struct CalculationError {
  std::string message;
};

class Evaluator {
 public:
  Evaluator(std::string_view text, const CalculatorLimits& limits) : text_(text), limits_(limits) {}

  BigRational evaluate() {
    skip_spaces();
    if (at_end()) fail("empty expression");
    BigRational value = expression();
    if (!at_end()) {
      if (text_[pos_] == ')') fail("unmatched ')' at position " + std::to_string(pos_));
      fail("unexpected " + describe_here() + ": expected an operator");
    }
    return value;
  }

 private:
  [[noreturn]] static void fail(std::string message) { throw CalculationError{std::move(message)}; }

  bool at_end() const { return pos_ >= text_.size(); }

  void skip_spaces() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  // Consumes `token` (after spaces) when it is next; "*" does not match the start of "**".
  bool take(std::string_view token) {
    skip_spaces();
    if (text_.substr(pos_, token.size()) != token) return false;
    const size_t after = pos_ + token.size();
    if ((token == "*" || token == "/") && after < text_.size() && text_[after] == token[0]) {
      return false;
    }
    pos_ = after;
    return true;
  }

  std::string describe_here() const {
    if (at_end()) return "end of expression";
    const char c = text_[pos_];
    std::string what = "character '" + std::string(1, c) + "' at position " + std::to_string(pos_);
    if (c == '^') what += " (use ** for powers)";
    if (c == '.' || c == ',') what += " (only integers are supported; / gives exact fractions)";
    if (c == '=') what += " (give the expression only)";
    return what;
  }

  // Every operation's result passes here: the size bound, and the time bound that keeps a
  // long expression of many large operations (each allowed on its own) from running on.
  BigRational checked(BigRational value) const {
    if (value.decimal_digits() > limits_.max_digits) {
      fail("result too large (more than " + std::to_string(limits_.max_digits) + " digits)");
    }
    if (std::chrono::steady_clock::now() >= deadline_) {
      fail("evaluation took longer than " + std::to_string(limits_.max_seconds) + " s");
    }
    return value;
  }

  void enter() {
    if (++depth_ > limits_.max_depth) {
      fail("expression nested deeper than " + std::to_string(limits_.max_depth) + " levels");
    }
  }

  BigRational expression() {
    BigRational value = term();
    for (;;) {
      if (take("+")) {
        value = checked(value + term());
      } else if (take("-")) {
        value = checked(value - term());
      } else {
        return value;
      }
    }
  }

  BigRational term() {
    BigRational value = unary();
    for (;;) {
      std::optional<BigRational> result;
      if (take("*")) {
        value = checked(value * unary());
        continue;
      }
      if (take("//")) {
        result = BigRational::floor_divide(value, unary());
      } else if (take("/")) {
        result = BigRational::divide(value, unary());
      } else if (take("%")) {
        result = BigRational::modulo(value, unary());
      } else {
        return value;
      }
      if (!result) fail("division by zero");
      value = checked(*result);
    }
  }

  BigRational unary() {
    enter();
    BigRational value;
    if (take("-")) {
      value = -unary();
    } else if (take("+")) {
      value = unary();
    } else {
      value = power();
    }
    --depth_;
    return value;
  }

  BigRational power() {
    const BigRational base = atom();
    if (!take("**")) return base;
    return raise(base, unary());
  }

  BigRational atom() {
    skip_spaces();
    if (take("(")) {
      // The nesting is counted in unary(), which every parenthesised atom is reached from.
      BigRational value = expression();
      if (!take(")")) fail("expected ')' but found " + describe_here());
      return value;
    }
    const size_t start = pos_;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    if (pos_ == start) fail("expected a number or '(' but found " + describe_here());
    if (!at_end() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E')) {
      fail("only integers are supported, at position " + std::to_string(start) +
           " (/ gives exact fractions)");
    }
    if (pos_ - start > limits_.max_digits) {
      fail("number too large (more than " + std::to_string(limits_.max_digits) + " digits)");
    }
    return BigRational(*BigInteger::from_decimal(text_.substr(start, pos_ - start)));
  }

  BigRational raise(const BigRational& base, const BigRational& exponent_value) {
    if (!exponent_value.is_integer()) fail("the exponent of ** must be an integer");
    const BigInteger& exponent = exponent_value.num();
    if (exponent.is_zero()) return BigRational(BigInteger(1));
    if (base.is_zero()) {
      if (exponent.is_negative()) fail("division by zero");
      return base;
    }
    // |base| = 1: any exponent, however large, is cheap.
    if (base.is_integer() && base.num().abs() == BigInteger(1)) {
      return base.num().is_negative() && exponent.is_odd() ? base : BigRational(BigInteger(1));
    }
    // Otherwise numerator or denominator is at least 2 in size, so the result has at least
    // exponent × log10(2) digits: refuse before computing what could not be kept.
    const std::optional<int64_t> small = exponent.abs().to_int64();
    const std::string too_large =
        "result too large (more than " + std::to_string(limits_.max_digits) + " digits)";
    if (!small || static_cast<double>(*small) * 0.30103 > static_cast<double>(limits_.max_digits)) {
      fail(too_large);
    }
    BigRational result(BigInteger(1));
    BigRational square = base;
    for (int64_t n = *small;;) {
      if (n & 1) result = checked(result * square);
      n >>= 1;
      if (n == 0) break;
      square = checked(square * square);
    }
    if (!exponent.is_negative()) return result;
    return *BigRational::divide(BigRational(BigInteger(1)), result);
  }

  std::string_view text_;
  const CalculatorLimits& limits_;
  const std::chrono::steady_clock::time_point deadline_ =
      std::chrono::steady_clock::now() + std::chrono::seconds(limits_.max_seconds);
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

CalculatorResult evaluate_calculator_expression(std::string_view expression,
                                                const CalculatorLimits& limits) {
  if (expression.size() > limits.max_expression_chars) {
    return {std::nullopt, "expression longer than " + std::to_string(limits.max_expression_chars) +
                              " characters"};
  }
  try {
    return {Evaluator(expression, limits).evaluate().to_string(), ""};
  } catch (const CalculationError& error) {
    return {std::nullopt, error.message};
  }
}

}  // namespace aspen::agent
