#include "aspen/reward/rational.h"

#include <limits>

#include "aspen/reward/imports.h"

namespace aspen::reward {
namespace {

__int128 abs128(__int128 x) {
  return x < 0 ? -x : x;
}

__int128 gcd128(__int128 a, __int128 b) {
  a = abs128(a);
  b = abs128(b);
  while (b != 0) {
    __int128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

}  // namespace

std::optional<Rational> Rational::reduce(__int128 num, __int128 den) {
  if (den == 0) return std::nullopt;
  if (den < 0) {
    num = -num;
    den = -den;
  }
  __int128 g = gcd128(num, den);
  if (g > 1) {
    num /= g;
    den /= g;
  }
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
  if (abs128(num) > kMax || den > kMax) return std::nullopt;
  Rational r;
  r.num_ = static_cast<int64_t>(num);
  r.den_ = static_cast<int64_t>(den);
  return r;
}

std::optional<Rational> Rational::make(int64_t num, int64_t den) {
  return reduce(num, den);
}

std::string Rational::to_string() const {
  return den_ == 1 ? std::to_string(num_) : std::to_string(num_) + "/" + std::to_string(den_);
}

// Operands are int64, so each product of two fits in __int128 before reduction.
std::optional<Rational> operator+(Rational a, Rational b) {
  return Rational::reduce(
      static_cast<__int128>(a.num_) * b.den_ + static_cast<__int128>(b.num_) * a.den_,
      static_cast<__int128>(a.den_) * b.den_);
}

std::optional<Rational> operator-(Rational a, Rational b) {
  return Rational::reduce(
      static_cast<__int128>(a.num_) * b.den_ - static_cast<__int128>(b.num_) * a.den_,
      static_cast<__int128>(a.den_) * b.den_);
}

std::optional<Rational> operator*(Rational a, Rational b) {
  return Rational::reduce(static_cast<__int128>(a.num_) * b.num_,
                          static_cast<__int128>(a.den_) * b.den_);
}

std::optional<Rational> operator/(Rational a, Rational b) {
  return Rational::reduce(static_cast<__int128>(a.num_) * b.den_,
                          static_cast<__int128>(a.den_) * b.num_);
}

}  // namespace aspen::reward
