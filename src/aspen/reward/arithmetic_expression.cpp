#include "aspen/reward/arithmetic_expression.h"

#include "aspen/reward/imports.h"

namespace aspen::reward {
namespace {

constexpr size_t kMaxLength = 4096;
constexpr size_t kMaxLiteralDigits = 18;  // < 2^63
constexpr int kMaxDepth = 64;

// Recursive descent over the grammar in the header. The first error stops parsing;
// evaluation failures (division by zero) only clear the value and keep parsing.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  ParsedExpression run() {
    ParsedExpression result;
    std::optional<Rational> value = expr(0);
    skip_spaces();
    if (error_.empty() && pos_ != text_.size()) fail("unexpected character");
    result.well_formed = error_.empty();
    result.error = error_;
    result.literals = std::move(literals_);
    if (result.well_formed) result.value = value;
    return result;
  }

 private:
  void fail(const std::string& why) {
    if (error_.empty()) error_ = why + " at offset " + std::to_string(pos_);
  }
  void skip_spaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  bool accept(char c) {
    skip_spaces();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  // Folds `next` into `acc` with `op`; an empty side (earlier division by zero) stays empty.
  static std::optional<Rational> apply(std::optional<Rational> acc, char op,
                                       std::optional<Rational> next) {
    if (!acc || !next) return std::nullopt;
    switch (op) {
      case '+':
        return *acc + *next;
      case '-':
        return *acc - *next;
      case '*':
        return *acc * *next;
      default:
        return *acc / *next;
    }
  }

  std::optional<Rational> expr(int depth) {
    std::optional<Rational> acc = term(depth);
    while (error_.empty()) {
      char op = accept('+') ? '+' : accept('-') ? '-' : 0;
      if (op == 0) break;
      acc = apply(acc, op, term(depth));
    }
    return acc;
  }

  std::optional<Rational> term(int depth) {
    std::optional<Rational> acc = factor(depth);
    while (error_.empty()) {
      char op = accept('*') ? '*' : accept('/') ? '/' : 0;
      if (op == 0) break;
      acc = apply(acc, op, factor(depth));
    }
    return acc;
  }

  std::optional<Rational> factor(int depth) {
    if (!error_.empty()) return std::nullopt;
    if (accept('(')) {
      if (depth + 1 > kMaxDepth) {
        fail("parentheses nested too deeply");
        return std::nullopt;
      }
      std::optional<Rational> inner = expr(depth + 1);
      if (!accept(')')) fail("expected ')'");
      return inner;
    }
    skip_spaces();
    size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    if (pos_ == start) {
      fail(pos_ < text_.size() ? "expected a number or '('" : "unexpected end");
      return std::nullopt;
    }
    if (pos_ - start > kMaxLiteralDigits) {
      fail("number too long");
      return std::nullopt;
    }
    int64_t literal = std::stoll(std::string(text_.substr(start, pos_ - start)));
    literals_.push_back(literal);
    return Rational(literal);
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string error_;
  std::vector<int64_t> literals_;
};

}  // namespace

ParsedExpression parse_arithmetic_expression(std::string_view text) {
  if (text.size() > kMaxLength) {
    ParsedExpression result;
    result.error = "expression longer than " + std::to_string(kMaxLength) + " characters";
    return result;
  }
  return Parser(text).run();
}

}  // namespace aspen::reward
