// Small string predicates shared across modules (they were written once per file
// before; unity builds compile several files as one unit, where those copies clash).
#pragma once

#include <cctype>
#include <string_view>

namespace aspen {

inline bool starts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

inline bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// std::isspace in the C locale, safe for any char (negative values included).
inline bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace aspen
