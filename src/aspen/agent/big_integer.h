// BigInteger: arbitrary-precision signed integers for the calculator tool, whose whole
// point is arithmetic a language model cannot do in its head: operands of hundreds of
// digits, exact (no double anywhere).
//
// Sign and magnitude; the magnitude in base 10^9 limbs, least significant first, so that
// decimal text converts in linear time (the calculator reads and prints decimal only).
// Multiplication is schoolbook and division Knuth's algorithm D: quadratic, which at the
// calculator's size bound (CalculatorLimits) is well under a millisecond per operation.
// Nothing here bounds sizes: callers that take untrusted input bound them (see
// calculator_expression.h). Value type; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aspen/agent/imports.h"

namespace aspen::agent {

class BigInteger {
 public:
  BigInteger() = default;  // zero
  explicit BigInteger(int64_t value);
  // Decimal digits only ([0-9]+, leading zeros allowed); nullopt otherwise.
  static std::optional<BigInteger> from_decimal(std::string_view digits);

  std::string to_string() const;  // "-123", "0"
  bool is_zero() const { return limbs_.empty(); }
  bool is_negative() const { return negative_; }
  // The number of decimal digits of |value| (1 for zero).
  size_t decimal_digits() const;
  // The value when it fits in int64.
  std::optional<int64_t> to_int64() const;
  bool is_odd() const { return !limbs_.empty() && (limbs_[0] & 1) != 0; }

  BigInteger operator-() const;
  BigInteger abs() const;
  friend BigInteger operator+(const BigInteger& a, const BigInteger& b);
  friend BigInteger operator-(const BigInteger& a, const BigInteger& b);
  friend BigInteger operator*(const BigInteger& a, const BigInteger& b);
  // Quotient truncated toward zero and remainder with the dividend's sign (C++'s / and %);
  // nullopt when b is zero.
  static std::optional<std::pair<BigInteger, BigInteger>> divmod(const BigInteger& a,
                                                                 const BigInteger& b);
  // gcd(|a|, |b|) >= 0; gcd(0, 0) = 0.
  static BigInteger gcd(BigInteger a, BigInteger b);

  // -1, 0 or 1.
  friend int compare(const BigInteger& a, const BigInteger& b);
  friend bool operator==(const BigInteger& a, const BigInteger& b) { return compare(a, b) == 0; }
  friend bool operator!=(const BigInteger& a, const BigInteger& b) { return compare(a, b) != 0; }
  friend bool operator<(const BigInteger& a, const BigInteger& b) { return compare(a, b) < 0; }

  static constexpr uint32_t kBase = 1'000'000'000;
  static constexpr int kBaseDigits = 9;

 private:
  using Limbs = std::vector<uint32_t>;
  BigInteger(Limbs limbs, bool negative);
  void trim();  // drops leading zero limbs; zero is never negative

  static int compare_magnitude(const Limbs& a, const Limbs& b);
  static Limbs add_magnitude(const Limbs& a, const Limbs& b);
  static Limbs subtract_magnitude(const Limbs& a, const Limbs& b);  // requires |a| >= |b|
  static Limbs multiply_magnitude(const Limbs& a, const Limbs& b);
  // |a| / |b| and |a| % |b|, b non-zero.
  static std::pair<Limbs, Limbs> divide_magnitude(const Limbs& a, const Limbs& b);

  Limbs limbs_;
  bool negative_ = false;
};

}  // namespace aspen::agent
