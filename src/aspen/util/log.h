// Minimal leveled logging to stderr. Thread-safe: each message is written with
// one call under a mutex, so lines from concurrent roles never interleave.
// The level comes from ASPEN_LOG_LEVEL (debug|info|warn|error; default info)
// or set_log_level().
#pragma once

#include <sstream>
#include <string>

namespace aspen {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, const std::string& message);

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

template <typename... Args>
void log_debug(const Args&... args) {
  if (log_level() <= LogLevel::kDebug) log_message(LogLevel::kDebug, detail::concat(args...));
}
template <typename... Args>
void log_info(const Args&... args) {
  if (log_level() <= LogLevel::kInfo) log_message(LogLevel::kInfo, detail::concat(args...));
}
template <typename... Args>
void log_warn(const Args&... args) {
  if (log_level() <= LogLevel::kWarn) log_message(LogLevel::kWarn, detail::concat(args...));
}
template <typename... Args>
void log_error(const Args&... args) {
  log_message(LogLevel::kError, detail::concat(args...));
}

}  // namespace aspen
