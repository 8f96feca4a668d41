// The calculator tool's language: exact arithmetic on integers of any size, with Python's
// operators and precedence so that a model that knows Python reads it right:
//   expr  := term (('+' | '-') term)*
//   term  := unary (('*' | '/' | '//' | '%') unary)*
//   unary := ('-' | '+') unary | power        -2**2 is -4, as in Python
//   power := atom ('**' unary)?               right-associative: 2**3**2 is 2**9
//   atom  := INTEGER | '(' expr ')'
// Values are exact fractions (BigRational): "/" divides exactly and a result that is not
// whole prints as a reduced fraction ("7/2"); "//" and "%" floor like Python's (-7 // 2
// is -4, -7 % 2 is 1); "**" takes an integer exponent, a negative one giving a fraction
// (2**-2 is 1/4); 0**0 is 1. Only integer literals: "1.5" is an error saying so; leading
// zeros are read as decimal ("007" is 7, where Python refuses the literal).
//
// Errors are values, never exceptions: the text becomes the tool's error observation, so
// it says what is wrong in words a model can act on ("division by zero", "unexpected
// character '^' at position 3: use ** for powers"). Input is untrusted: the expression's
// length, its nesting depth, every intermediate value's size and the time are bounded
// (CalculatorLimits), so no input can exhaust memory, time or the stack.
// Pure function; thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "aspen/agent/imports.h"

namespace aspen::agent {

struct CalculatorLimits {
  size_t max_expression_chars = 10'000;
  // Digits of any value (numerator or denominator), intermediate ones included. At this
  // size one multiplication takes about a millisecond (schoolbook, big_integer.h).
  size_t max_digits = 10'000;
  int max_depth = 100;  // parentheses and unary operators, nested
  // Wall time of one evaluation: only an expression built to be slow (hundreds of
  // operations on thousands of digits) comes near it.
  int max_seconds = 2;
};

struct CalculatorResult {
  std::optional<std::string> value;  // "121932631112635269", "-7/2"
  std::string error;                 // set exactly when value is empty
};

CalculatorResult evaluate_calculator_expression(std::string_view expression,
                                                const CalculatorLimits& limits = {});

}  // namespace aspen::agent
