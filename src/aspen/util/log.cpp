#include "aspen/util/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "aspen/util/mutex.h"

namespace aspen {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("ASPEN_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(env, "warn") == 0) return LogLevel::kWarn;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
  }
  return "?";
}

}  // namespace

void set_log_level(LogLevel level) { level_storage().store(static_cast<int>(level)); }

LogLevel log_level() { return static_cast<LogLevel>(level_storage().load()); }

void log_message(LogLevel level, const std::string& message) {
  static Mutex mutex;
  MutexLock lock(mutex);
  std::fprintf(stderr, "[aspen %s] %s\n", level_name(level), message.c_str());
}

}  // namespace aspen
