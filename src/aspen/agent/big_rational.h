// BigRational: exact fractions of BigIntegers, the calculator tool's values, so that "/"
// stays exact (7/2 is 7/2, not 3.5000000000000004) while // and % follow Python.
// Always reduced, denominator > 0. Operations that divide return nullopt for a zero
// divisor instead of throwing: divisors come from untrusted model output.
// Value type; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "aspen/agent/big_integer.h"
#include "aspen/agent/imports.h"

namespace aspen::agent {

class BigRational {
 public:
  BigRational() = default;  // zero
  explicit BigRational(BigInteger integer) : num_(std::move(integer)) {}
  // nullopt when den is zero.
  static std::optional<BigRational> make(BigInteger num, BigInteger den);

  const BigInteger& num() const { return num_; }
  const BigInteger& den() const { return den_; }
  bool is_integer() const { return den_ == BigInteger(1); }
  bool is_zero() const { return num_.is_zero(); }
  // "7", "-7/2".
  std::string to_string() const;
  // The larger digit count of numerator and denominator: the size callers bound.
  size_t decimal_digits() const;
  // The largest integer <= value.
  BigInteger floor() const;

  friend BigRational operator+(const BigRational& a, const BigRational& b);
  friend BigRational operator-(const BigRational& a, const BigRational& b);
  friend BigRational operator*(const BigRational& a, const BigRational& b);
  BigRational operator-() const;
  // a / b; nullopt when b is zero.
  static std::optional<BigRational> divide(const BigRational& a, const BigRational& b);
  // Python's a // b = floor(a / b) and a % b = a - b × (a // b) (the remainder takes the
  // divisor's sign); nullopt when b is zero.
  static std::optional<BigRational> floor_divide(const BigRational& a, const BigRational& b);
  static std::optional<BigRational> modulo(const BigRational& a, const BigRational& b);

  friend bool operator==(const BigRational& a, const BigRational& b) {
    return a.num_ == b.num_ && a.den_ == b.den_;
  }

 private:
  BigInteger num_;
  BigInteger den_{1};
};

}  // namespace aspen::agent
