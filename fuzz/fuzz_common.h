// The contract every fuzz target checks: an input either parses or raises aspen::Error.
// ASPEN_FUZZ_CONTRACT(body) runs `body`; aspen::Error is an accepted rejection, any
// other exception prints its type and message and aborts (a defect libFuzzer reports
// with the input). Crashes, sanitizer reports, timeouts and allocations over
// -malloc_limit_mb / -rss_limit_mb are reported by libFuzzer itself.
#pragma once

#include <cxxabi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <typeinfo>

#include "aspen/util/error.h"

namespace aspen::fuzz {

inline std::string type_name(const std::type_info& type) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : type.name();
  std::free(demangled);
  return name;
}

[[noreturn]] inline void defect(const std::string& what) {
  std::fprintf(stderr, "\nFUZZ DEFECT: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// Aborts unless `condition` holds: for properties a successful parse must have.
inline void require(bool condition, const char* property) {
  if (!condition) defect(std::string("property violated: ") + property);
}

// Splits `data` at the first NUL byte: (before, after). No NUL: (all, "").
inline std::pair<std::string_view, std::string_view> split_at_nul(const uint8_t* data,
                                                                  size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  if (nul == std::string_view::npos) return {all, {}};
  return {all.substr(0, nul), all.substr(nul + 1)};
}

}  // namespace aspen::fuzz

// Runs `body`; aspen::Error is a rejection, every other exception a defect.
#define ASPEN_FUZZ_CONTRACT(...)                                                    \
  do {                                                                              \
    try {                                                                           \
      __VA_ARGS__;                                                                  \
    } catch (const ::aspen::Error&) {                                               \
    } catch (const std::exception& e) {                                             \
      ::aspen::fuzz::defect("exception " + ::aspen::fuzz::type_name(typeid(e)) +    \
                            " escaped instead of aspen::Error: " + e.what());       \
    } catch (...) {                                                                 \
      ::aspen::fuzz::defect("a non-std exception escaped instead of aspen::Error"); \
    }                                                                               \
  } while (0)
