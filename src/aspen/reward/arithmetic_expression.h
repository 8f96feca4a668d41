// Parsing and exact evaluation of the equations a countdown policy writes: non-negative
// integer literals, binary + - * /, parentheses, spaces. No unary operators (each given
// number must be used as given), no decimals, no other characters — anything else makes
// the expression malformed. Grammar (usual precedence, left-associative):
//   expr   := term (('+' | '-') term)*
//   term   := factor (('*' | '/') factor)*
//   factor := INTEGER | '(' expr ')'
// Evaluation is in Rational arithmetic; division by zero or overflow leaves `value` empty
// on a still well-formed expression. Input is untrusted: length (4096 chars), literal size
// (18 digits) and nesting depth (64) are bounded so no input can exhaust the stack.
// Pure function; thread-safe; never throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aspen/reward/imports.h"
#include "aspen/reward/rational.h"

namespace aspen::reward {

struct ParsedExpression {
  bool well_formed = false;
  std::string error;              // why it is malformed, for tests and debugging
  std::vector<int64_t> literals;  // integer literals in order of appearance
  std::optional<Rational> value;  // empty when malformed, dividing by zero or overflowing
};

ParsedExpression parse_arithmetic_expression(std::string_view text);

}  // namespace aspen::reward
