#include "aspen/tokenizer/python_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "aspen/tokenizer/imports.h"
#include "aspen/util/error.h"

namespace aspen::tokenizer {
namespace {

void append_string(const std::string& text, std::string& out) {
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void append_value(const nlohmann::ordered_json& value, std::string& out) {
  using Type = nlohmann::ordered_json::value_t;
  switch (value.type()) {
    case Type::null:
      out += "null";
      return;
    case Type::boolean:
      out += value.get<bool>() ? "true" : "false";
      return;
    case Type::number_integer:
      out += std::to_string(value.get<int64_t>());
      return;
    case Type::number_unsigned:
      out += std::to_string(value.get<uint64_t>());
      return;
    case Type::number_float:
      out += python_float_repr(value.get<double>());
      return;
    case Type::string:
      append_string(value.get_ref<const std::string&>(), out);
      return;
    case Type::array: {
      out += '[';
      bool first = true;
      for (const auto& element : value) {
        if (!first) out += ", ";
        first = false;
        append_value(element, out);
      }
      out += ']';
      return;
    }
    case Type::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, element] : value.items()) {
        if (!first) out += ", ";
        first = false;
        append_string(key, out);
        out += ": ";
        append_value(element, out);
      }
      out += '}';
      return;
    }
    case Type::binary:
    case Type::discarded:
      break;
  }
  throw Error("a JSON value of a kind Python's json.dumps cannot write", "python_json_dumps");
}

}  // namespace

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value < 0 ? "-Infinity" : "Infinity";
  // Shortest round-trip digits, as Python's repr picks them: "d.ddde±x".
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), std::fabs(value),
                                    std::chars_format::scientific);
  const std::string scientific(buffer, result.ptr);
  const size_t e = scientific.find('e');
  std::string digits = scientific.substr(0, e);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  // decpt: where the decimal point goes, value = 0.digits × 10^decpt (Python's dtoa).
  const int decpt = std::atoi(scientific.c_str() + e + 1) + 1;
  const int n = static_cast<int>(digits.size());
  std::string out = std::signbit(value) ? "-" : "";
  // float_repr_style 'short' (Python/pystrtod.c): exponent form when decpt <= -4 or > 16.
  if (decpt <= -4 || decpt > 16) {
    out += digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    const int exponent = decpt - 1;
    char tail[16];
    std::snprintf(tail, sizeof(tail), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + tail;
  }
  if (decpt <= 0) return out + "0." + std::string(-decpt, '0') + digits;
  if (decpt >= n) return out + digits + std::string(decpt - n, '0') + ".0";
  return out + digits.substr(0, decpt) + "." + digits.substr(decpt);
}

std::string python_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  append_value(value, out);
  return out;
}

}  // namespace aspen::tokenizer
