#include "aspen/reward/answer_normalizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include "aspen/reward/imports.h"
#include "aspen/util/strings.h"

namespace aspen::reward {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alpha(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

// Removes `command` wherever it is not the prefix of a longer command name, so removing
// "\left" keeps "\leftarrow".
void remove_command(std::string& s, std::string_view command) {
  size_t at = s.find(command);
  while (at != std::string::npos) {
    size_t end = at + command.size();
    if (end < s.size() && is_alpha(s[end])) {
      at = s.find(command, end);
      continue;
    }
    s.erase(at, command.size());
    at = s.find(command, at);
  }
}

// Index one past the brace group that opens at s[open], or npos when unbalanced.
size_t brace_group_end(const std::string& s, size_t open) {
  int depth = 0;
  for (size_t i = open; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) return i + 1;
  }
  return std::string::npos;
}

// "\text{abc}" -> "abc" for each text-like command.
void unwrap_text_commands(std::string& s) {
  for (std::string_view command : {"\\text", "\\textbf", "\\mathrm", "\\mathbf", "\\mbox"}) {
    std::string open = std::string(command) + "{";
    for (size_t at = s.find(open); at != std::string::npos; at = s.find(open, at)) {
      size_t brace = at + command.size();
      size_t end = brace_group_end(s, brace);
      if (end == std::string::npos) break;
      s = s.substr(0, at) + s.substr(brace + 1, end - brace - 2) + s.substr(end);
    }
  }
}

// Rewrites the arguments after each `command` in braced form: "\frac12" -> "\frac{1}{2}".
// An argument is a brace group or a single character.
void brace_arguments(std::string& s, std::string_view command, int arity) {
  std::string out;
  size_t pos = 0;
  for (size_t at = s.find(command); at != std::string::npos; at = s.find(command, pos)) {
    size_t cursor = at + command.size();
    if (cursor < s.size() && is_alpha(s[cursor])) {  // a longer command, e.g. \fracture
      out += s.substr(pos, cursor - pos);
      pos = cursor;
      continue;
    }
    out += s.substr(pos, cursor - pos);
    for (int arg = 0; arg < arity && cursor < s.size(); ++arg) {
      if (s[cursor] == '{') {
        size_t end = brace_group_end(s, cursor);
        if (end == std::string::npos) break;
        out += s.substr(cursor, end - cursor);
        cursor = end;
      } else {
        out += "{" + s.substr(cursor, 1) + "}";
        cursor += 1;
      }
    }
    pos = cursor;
  }
  s = out + s.substr(std::min(pos, s.size()));
}

bool is_unsigned_integer(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}

// "1,234,567.5" with well-formed 3-digit groups -> "1234567.5"; anything else unchanged,
// so a tuple like "1,2" keeps its comma.
std::string drop_thousands_separators(const std::string& s) {
  if (s.find(',') == std::string::npos) return s;
  size_t start = (!s.empty() && s[0] == '-') ? 1 : 0;
  size_t dot = s.find('.');
  std::string integer = s.substr(start, dot == std::string::npos ? s.npos : dot - start);
  std::string fraction = dot == std::string::npos ? "" : s.substr(dot + 1);
  if (!fraction.empty() && !is_unsigned_integer(fraction)) return s;
  size_t first_comma = integer.find(',');
  if (first_comma == 0 || first_comma > 3) return s;
  for (size_t i = first_comma; i < integer.size(); i += 4) {
    if (integer[i] != ',' || i + 4 > integer.size()) return s;
    if (!is_unsigned_integer(integer.substr(i + 1, 3))) return s;
  }
  if (!is_unsigned_integer(integer.substr(0, first_comma))) return s;
  std::string digits;
  for (char c : integer) {
    if (c != ',') digits += c;
  }
  return s.substr(0, start) + digits + (dot == std::string::npos ? "" : "." + fraction);
}

// "12 cm" -> "12" when what follows the first space is only letters and spaces.
std::string strip_unit_words(const std::string& s) {
  size_t space = s.find(' ');
  if (space == std::string::npos || space == 0) return s;
  std::string rest = s.substr(space);
  bool words =
      std::all_of(rest.begin(), rest.end(), [](char c) { return is_alpha(c) || is_space(c); });
  bool numeric_head = std::any_of(s.begin(), s.begin() + space, is_digit);
  return words && numeric_head ? s.substr(0, space) : s;
}

std::optional<double> parse_plain_number(std::string_view s) {
  if (s.empty()) return std::nullopt;
  size_t body = (s[0] == '-') ? 1 : 0;
  if (body >= s.size() || !(is_digit(s[body]) || s[body] == '.')) return std::nullopt;
  bool has_digit = false;
  for (char c : s.substr(body)) {
    if (is_digit(c)) {
      has_digit = true;
    } else if (c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-') {
      return std::nullopt;
    }
  }
  if (!has_digit) return std::nullopt;
  std::string text(s);
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace

std::string normalize_answer(std::string_view raw, const AnswerNormalization& options) {
  std::string s(raw);
  replace_all(s, "\xE2\x88\x92", "-");  // U+2212 MINUS SIGN
  replace_all(s, "\n", " ");
  unwrap_text_commands(s);
  remove_command(s, "\\left");
  remove_command(s, "\\right");
  remove_command(s, "\\displaystyle");
  for (std::string_view spacing : {"\\!", "\\,", "\\;", "\\:", "\\ "}) replace_all(s, spacing, "");
  replace_all(s, "^{\\circ}", "");
  replace_all(s, "^\\circ", "");
  replace_all(s, "$", "");
  replace_all(s, "\\dfrac", "\\frac");
  replace_all(s, "\\tfrac", "\\frac");
  if (options.strip_percent) {
    replace_all(s, "\\%", "");
    replace_all(s, "%", "");
  }
  // Trim before unit stripping so "12 cm " still counts as "number then words".
  while (!s.empty() && is_space(s.back())) s.pop_back();
  while (!s.empty() && is_space(s.front())) s.erase(0, 1);
  if (options.strip_units) s = strip_unit_words(s);
  s.erase(std::remove_if(s.begin(), s.end(), is_space), s.end());
  while (!s.empty() && s.back() == '.') s.pop_back();
  if (!s.empty() && s[0] == '+') s.erase(0, 1);

  // "x=5" / "k=3": a short variable name on the left is not part of the answer.
  size_t eq = s.find('=');
  if (eq != std::string::npos && eq > 0 && eq <= 2 && s.find('=', eq + 1) == std::string::npos &&
      std::all_of(s.begin(), s.begin() + eq, is_alpha)) {
    s = s.substr(eq + 1);
  }
  s = drop_thousands_separators(s);
  brace_arguments(s, "\\frac", 2);
  brace_arguments(s, "\\sqrt", 1);
  if (s.rfind(".", 0) == 0) s = "0" + s;
  if (s.rfind("-.", 0) == 0) s = "-0" + s.substr(1);

  size_t slash = s.find('/');
  if (slash != std::string::npos) {
    size_t sign = (s[0] == '-') ? 1 : 0;
    std::string numerator = s.substr(sign, slash - sign);
    std::string denominator = s.substr(slash + 1);
    if (is_unsigned_integer(numerator) && is_unsigned_integer(denominator)) {
      s = s.substr(0, sign) + "\\frac{" + numerator + "}{" + denominator + "}";
    }
  }
  return s;
}

std::optional<double> parse_number(std::string_view s) {
  double sign = 1.0;
  std::string_view body = s;
  if (body.substr(0, 6) == "-\\frac") {
    sign = -1.0;
    body.remove_prefix(1);
  }
  if (body.substr(0, 6) != "\\frac{") return parse_plain_number(s);
  // \frac{a}{b} with a and b plain numbers (already braced by normalize_answer).
  size_t a_end = body.find('}', 6);
  if (a_end == std::string_view::npos || a_end + 1 >= body.size() || body[a_end + 1] != '{' ||
      body.back() != '}') {
    return std::nullopt;
  }
  std::optional<double> a = parse_plain_number(body.substr(6, a_end - 6));
  std::optional<double> b = parse_plain_number(body.substr(a_end + 2, body.size() - a_end - 3));
  if (!a || !b || *b == 0.0) return std::nullopt;
  return sign * *a / *b;
}

bool numbers_close(double a, double b, double rel_tol, double abs_tol) {
  return std::fabs(a - b) <= std::max(abs_tol, rel_tol * std::max(std::fabs(a), std::fabs(b)));
}

}  // namespace aspen::reward
