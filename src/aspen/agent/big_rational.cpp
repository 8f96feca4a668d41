#include "aspen/agent/big_rational.h"

#include <algorithm>

#include "aspen/agent/imports.h"

namespace aspen::agent {

std::optional<BigRational> BigRational::make(BigInteger num, BigInteger den) {
  if (den.is_zero()) return std::nullopt;
  if (den.is_negative()) {
    num = -num;
    den = -den;
  }
  const BigInteger divisor = BigInteger::gcd(num, den);
  BigRational out;
  if (divisor == BigInteger(1)) {
    out.num_ = std::move(num);
    out.den_ = std::move(den);
  } else {
    out.num_ = BigInteger::divmod(num, divisor)->first;
    out.den_ = BigInteger::divmod(den, divisor)->first;
  }
  return out;
}

std::string BigRational::to_string() const {
  return is_integer() ? num_.to_string() : num_.to_string() + "/" + den_.to_string();
}

size_t BigRational::decimal_digits() const {
  return std::max(num_.decimal_digits(), den_.decimal_digits());
}

BigInteger BigRational::floor() const {
  auto [quotient, remainder] = *BigInteger::divmod(num_, den_);
  // divmod truncates toward zero; below zero with a remainder, floor is one less.
  return remainder.is_zero() || !num_.is_negative() ? quotient : quotient - BigInteger(1);
}

BigRational operator+(const BigRational& a, const BigRational& b) {
  if (a.is_integer() && b.is_integer()) return BigRational(a.num_ + b.num_);
  return *BigRational::make(a.num_ * b.den_ + b.num_ * a.den_, a.den_ * b.den_);
}

BigRational operator-(const BigRational& a, const BigRational& b) {
  return a + (-b);
}

BigRational operator*(const BigRational& a, const BigRational& b) {
  if (a.is_integer() && b.is_integer()) return BigRational(a.num_ * b.num_);
  return *BigRational::make(a.num_ * b.num_, a.den_ * b.den_);
}

BigRational BigRational::operator-() const {
  BigRational out = *this;
  out.num_ = -num_;
  return out;
}

std::optional<BigRational> BigRational::divide(const BigRational& a, const BigRational& b) {
  if (b.is_zero()) return std::nullopt;
  return make(a.num_ * b.den_, a.den_ * b.num_);
}

std::optional<BigRational> BigRational::floor_divide(const BigRational& a, const BigRational& b) {
  const std::optional<BigRational> quotient = divide(a, b);
  if (!quotient) return std::nullopt;
  return BigRational(quotient->floor());
}

std::optional<BigRational> BigRational::modulo(const BigRational& a, const BigRational& b) {
  const std::optional<BigRational> quotient = floor_divide(a, b);
  if (!quotient) return std::nullopt;
  return a - b * *quotient;
}

}  // namespace aspen::agent
