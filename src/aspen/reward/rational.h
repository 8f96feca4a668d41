// Rational: exact fractions over int64 for grading arithmetic answers (countdown), so
// "(7/3)*3" is exactly 7 and no floating-point tolerance decides a reward.
// Always reduced, denominator > 0. Every operation returns nullopt instead of overflowing
// or dividing by zero, because operands come from untrusted model output.
// Value type; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "aspen/reward/imports.h"

namespace aspen::reward {

class Rational {
 public:
  Rational() = default;
  explicit Rational(int64_t integer) : num_(integer) {}
  // nullopt when den == 0.
  static std::optional<Rational> make(int64_t num, int64_t den);

  int64_t num() const { return num_; }
  int64_t den() const { return den_; }
  bool is_integer() const { return den_ == 1; }
  // "7" or "-7/3".
  std::string to_string() const;

  friend std::optional<Rational> operator+(Rational a, Rational b);
  friend std::optional<Rational> operator-(Rational a, Rational b);
  friend std::optional<Rational> operator*(Rational a, Rational b);
  friend std::optional<Rational> operator/(Rational a, Rational b);
  friend bool operator==(Rational a, Rational b) { return a.num_ == b.num_ && a.den_ == b.den_; }
  friend bool operator!=(Rational a, Rational b) { return !(a == b); }

 private:
  // Reduces a wide fraction; nullopt when it does not fit in int64 after reduction.
  static std::optional<Rational> reduce(__int128 num, __int128 den);

  int64_t num_ = 0;
  int64_t den_ = 1;
};

}  // namespace aspen::reward
