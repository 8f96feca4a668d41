// Canonical form of a math answer, so that equal answers written differently compare
// equal: "$1,234.$" -> "1234", "\dfrac12" -> "\frac{1}{2}", "3/4" -> "\frac{3}{4}",
// "\text{5}" -> "5", "−3" (U+2212) -> "-3", "x = 5" -> "5", "\left( 1,2 \right)" -> "(1,2)".
// Rules (the usual MATH/GSM8K grading normalisation, cf. verl's math and math_verify):
// unicode minus; \text/\textbf/\mathrm/\mathbf/\mbox unwrapped; \left/\right, \!, \, \; \:,
// $, ^\circ, \displaystyle removed; \dfrac/\tfrac -> \frac; optional percent signs; optional
// trailing unit words ("5 dollars" -> "5"); all whitespace removed; trailing '.' and leading
// '+' dropped; thousands separators removed only in a well-formed "d,ddd,ddd" number; a short
// "v=" prefix dropped; \frac and \sqrt arguments braced; ".5" -> "0.5"; integer "a/b" ->
// "\frac{a}{b}".
// parse_number() then reads integers, decimals, scientific notation and \frac{a}{b} of
// numbers, so "0.5" and "\frac{1}{2}" compare equal numerically.
// Pure functions; thread-safe; never throw.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "aspen/reward/imports.h"

namespace aspen::reward {

struct AnswerNormalization {
  bool strip_percent = true;  // "50\%" -> "50" (MATH answers state the unit in the question)
  bool strip_units = false;   // "12 cm" -> "12": only when the rest is letters and spaces
};

std::string normalize_answer(std::string_view raw, const AnswerNormalization& options = {});

// The value of an already-normalised answer, or nullopt when it is not a plain number
// (digits with optional sign, '.', exponent) or \frac of two such numbers. Never reads
// "inf", "nan" or hex floats.
std::optional<double> parse_number(std::string_view normalized);

// True when |a - b| <= max(abs_tol, rel_tol * max(|a|, |b|)).
bool numbers_close(double a, double b, double rel_tol, double abs_tol);

}  // namespace aspen::reward
