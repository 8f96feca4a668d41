#include "aspen/agent/big_integer.h"

#include "aspen/agent/imports.h"

namespace aspen::agent {
namespace {

using Limbs = std::vector<uint32_t>;
constexpr uint64_t kBase64 = BigInteger::kBase;

void trim_limbs(Limbs& limbs) {
  while (!limbs.empty() && limbs.back() == 0) limbs.pop_back();
}

// limbs × factor, factor < kBase.
Limbs multiply_small(const Limbs& limbs, uint64_t factor) {
  Limbs out(limbs.size() + 1, 0);
  uint64_t carry = 0;
  for (size_t i = 0; i < limbs.size(); ++i) {
    const uint64_t product = limbs[i] * factor + carry;
    out[i] = static_cast<uint32_t>(product % kBase64);
    carry = product / kBase64;
  }
  out[limbs.size()] = static_cast<uint32_t>(carry);
  trim_limbs(out);
  return out;
}

// limbs / divisor and the remainder, 0 < divisor < kBase.
std::pair<Limbs, uint64_t> divide_small(const Limbs& limbs, uint64_t divisor) {
  Limbs quotient(limbs.size(), 0);
  uint64_t remainder = 0;
  for (size_t i = limbs.size(); i-- > 0;) {
    const uint64_t current = remainder * kBase64 + limbs[i];
    quotient[i] = static_cast<uint32_t>(current / divisor);
    remainder = current % divisor;
  }
  trim_limbs(quotient);
  return {quotient, remainder};
}

}  // namespace

BigInteger::BigInteger(int64_t value) : negative_(value < 0) {
  // Via uint64: the magnitude of INT64_MIN does not fit in int64.
  uint64_t magnitude = value < 0 ? ~static_cast<uint64_t>(value) + 1 : static_cast<uint64_t>(value);
  while (magnitude != 0) {
    limbs_.push_back(static_cast<uint32_t>(magnitude % kBase64));
    magnitude /= kBase64;
  }
}

BigInteger::BigInteger(Limbs limbs, bool negative) : limbs_(std::move(limbs)), negative_(negative) {
  trim();
}

void BigInteger::trim() {
  trim_limbs(limbs_);
  if (limbs_.empty()) negative_ = false;
}

std::optional<BigInteger> BigInteger::from_decimal(std::string_view digits) {
  if (digits.empty()) return std::nullopt;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  Limbs limbs;
  for (size_t end = digits.size(); end > 0;) {
    const size_t begin = end >= static_cast<size_t>(kBaseDigits) ? end - kBaseDigits : 0;
    uint32_t limb = 0;
    for (size_t i = begin; i < end; ++i) limb = limb * 10 + static_cast<uint32_t>(digits[i] - '0');
    limbs.push_back(limb);
    end = begin;
  }
  return BigInteger(std::move(limbs), false);
}

std::string BigInteger::to_string() const {
  if (limbs_.empty()) return "0";
  std::string out = negative_ ? "-" : "";
  out += std::to_string(limbs_.back());
  for (size_t i = limbs_.size() - 1; i-- > 0;) {
    const std::string limb = std::to_string(limbs_[i]);
    out.append(kBaseDigits - limb.size(), '0');
    out += limb;
  }
  return out;
}

size_t BigInteger::decimal_digits() const {
  if (limbs_.empty()) return 1;
  return (limbs_.size() - 1) * kBaseDigits + std::to_string(limbs_.back()).size();
}

std::optional<int64_t> BigInteger::to_int64() const {
  if (limbs_.size() > 3) return std::nullopt;
  unsigned __int128 magnitude = 0;
  for (size_t i = limbs_.size(); i-- > 0;) magnitude = magnitude * kBase64 + limbs_[i];
  const unsigned __int128 limit = static_cast<unsigned __int128>(INT64_MAX) + (negative_ ? 1 : 0);
  if (magnitude > limit) return std::nullopt;
  return negative_ ? static_cast<int64_t>(~static_cast<uint64_t>(magnitude) + 1)
                   : static_cast<int64_t>(magnitude);
}

BigInteger BigInteger::operator-() const {
  return BigInteger(limbs_, !negative_);
}

BigInteger BigInteger::abs() const {
  return BigInteger(limbs_, false);
}

int BigInteger::compare_magnitude(const Limbs& a, const Limbs& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  for (size_t i = a.size(); i-- > 0;) {
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return 0;
}

BigInteger::Limbs BigInteger::add_magnitude(const Limbs& a, const Limbs& b) {
  Limbs out(std::max(a.size(), b.size()) + 1, 0);
  uint64_t carry = 0;
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    const uint64_t sum = (i < a.size() ? a[i] : 0) + uint64_t{i < b.size() ? b[i] : 0} + carry;
    out[i] = static_cast<uint32_t>(sum % kBase64);
    carry = sum / kBase64;
  }
  out.back() = static_cast<uint32_t>(carry);
  trim_limbs(out);
  return out;
}

BigInteger::Limbs BigInteger::subtract_magnitude(const Limbs& a, const Limbs& b) {
  Limbs out(a.size(), 0);
  int64_t borrow = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t difference = int64_t{a[i]} - (i < b.size() ? int64_t{b[i]} : 0) - borrow;
    borrow = difference < 0 ? 1 : 0;
    if (difference < 0) difference += static_cast<int64_t>(kBase64);
    out[i] = static_cast<uint32_t>(difference);
  }
  trim_limbs(out);
  return out;
}

BigInteger::Limbs BigInteger::multiply_magnitude(const Limbs& a, const Limbs& b) {
  if (a.empty() || b.empty()) return {};
  Limbs out(a.size() + b.size(), 0);
  for (size_t i = 0; i < a.size(); ++i) {
    uint64_t carry = 0;
    for (size_t j = 0; j < b.size(); ++j) {
      const uint64_t current = out[i + j] + uint64_t{a[i]} * b[j] + carry;
      out[i + j] = static_cast<uint32_t>(current % kBase64);
      carry = current / kBase64;
    }
    for (size_t k = i + b.size(); carry != 0; ++k) {
      const uint64_t current = out[k] + carry;
      out[k] = static_cast<uint32_t>(current % kBase64);
      carry = current / kBase64;
    }
  }
  trim_limbs(out);
  return out;
}

// Knuth, TAOCP vol. 2, 4.3.1, algorithm D, in base 10^9.
std::pair<BigInteger::Limbs, BigInteger::Limbs> BigInteger::divide_magnitude(const Limbs& a,
                                                                             const Limbs& b) {
  if (compare_magnitude(a, b) < 0) return {{}, a};
  if (b.size() == 1) {
    auto [quotient, remainder] = divide_small(a, b[0]);
    return {quotient, remainder == 0 ? Limbs{} : Limbs{static_cast<uint32_t>(remainder)}};
  }
  // D1: scale both so that the divisor's top limb is at least kBase / 2, which keeps each
  // quotient-limb estimate at most 2 too large.
  const uint64_t scale = kBase64 / (uint64_t{b.back()} + 1);
  Limbs u = multiply_small(a, scale);
  const Limbs v = multiply_small(b, scale);
  const size_t n = v.size();
  const size_t m = a.size() - n;
  u.resize(a.size() + 1, 0);
  Limbs quotient(m + 1, 0);
  for (size_t j = m + 1; j-- > 0;) {
    // D3: estimate the quotient limb from the top two limbs, corrected by the third.
    const uint64_t top = uint64_t{u[j + n]} * kBase64 + u[j + n - 1];
    uint64_t qhat = top / v[n - 1];
    uint64_t rhat = top % v[n - 1];
    // Once rhat reaches kBase the correction test cannot hold (Knuth), and rhat × kBase
    // would overflow, so it is only evaluated below that.
    while (qhat >= kBase64 || (rhat < kBase64 && qhat * v[n - 2] > rhat * kBase64 + u[j + n - 2])) {
      --qhat;
      rhat += v[n - 1];
    }
    // D4: u[j .. j+n] -= qhat × v.
    int64_t borrow = 0;
    uint64_t carry = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t product = qhat * v[i] + carry;
      carry = product / kBase64;
      int64_t difference = int64_t{u[i + j]} - static_cast<int64_t>(product % kBase64) - borrow;
      borrow = difference < 0 ? 1 : 0;
      if (difference < 0) difference += static_cast<int64_t>(kBase64);
      u[i + j] = static_cast<uint32_t>(difference);
    }
    int64_t top_limb = int64_t{u[j + n]} - static_cast<int64_t>(carry) - borrow;
    if (top_limb < 0) {
      // D6: the estimate was one too large (rare): add v back.
      --qhat;
      uint64_t add_carry = 0;
      for (size_t i = 0; i < n; ++i) {
        const uint64_t sum = uint64_t{u[i + j]} + v[i] + add_carry;
        u[i + j] = static_cast<uint32_t>(sum % kBase64);
        add_carry = sum / kBase64;
      }
      top_limb += static_cast<int64_t>(add_carry);
    }
    u[j + n] = static_cast<uint32_t>(top_limb);
    quotient[j] = static_cast<uint32_t>(qhat);
  }
  trim_limbs(quotient);
  // D8: the remainder is u's low n limbs, unscaled.
  u.resize(n);
  trim_limbs(u);
  return {quotient, divide_small(u, scale).first};
}

BigInteger operator+(const BigInteger& a, const BigInteger& b) {
  if (a.negative_ == b.negative_)
    return BigInteger(BigInteger::add_magnitude(a.limbs_, b.limbs_), a.negative_);
  if (BigInteger::compare_magnitude(a.limbs_, b.limbs_) >= 0) {
    return BigInteger(BigInteger::subtract_magnitude(a.limbs_, b.limbs_), a.negative_);
  }
  return BigInteger(BigInteger::subtract_magnitude(b.limbs_, a.limbs_), b.negative_);
}

BigInteger operator-(const BigInteger& a, const BigInteger& b) {
  return a + (-b);
}

BigInteger operator*(const BigInteger& a, const BigInteger& b) {
  return BigInteger(BigInteger::multiply_magnitude(a.limbs_, b.limbs_), a.negative_ != b.negative_);
}

std::optional<std::pair<BigInteger, BigInteger>> BigInteger::divmod(const BigInteger& a,
                                                                    const BigInteger& b) {
  if (b.is_zero()) return std::nullopt;
  auto [quotient, remainder] = divide_magnitude(a.limbs_, b.limbs_);
  return std::make_pair(BigInteger(std::move(quotient), a.negative_ != b.negative_),
                        BigInteger(std::move(remainder), a.negative_));
}

BigInteger BigInteger::gcd(BigInteger a, BigInteger b) {
  a = a.abs();
  b = b.abs();
  while (!b.is_zero()) {
    BigInteger remainder = divmod(a, b)->second;
    a = std::move(b);
    b = std::move(remainder);
  }
  return a;
}

int compare(const BigInteger& a, const BigInteger& b) {
  if (a.negative_ != b.negative_) return a.negative_ ? -1 : 1;
  const int magnitude = BigInteger::compare_magnitude(a.limbs_, b.limbs_);
  return a.negative_ ? -magnitude : magnitude;
}

}  // namespace aspen::agent
