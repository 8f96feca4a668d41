#include "aspen/agent/command_environment.h"

#include <chrono>
#include <cmath>

#include "aspen/agent/environment_protocol.h"
#include "aspen/agent/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/seconds_since.h"

namespace aspen::agent {
namespace {

EnvironmentFault fault_of(LineProcess::Failure failure) {
  switch (failure) {
    case LineProcess::Failure::kTimeout:
      return EnvironmentFault::kTimeout;
    case LineProcess::Failure::kLineTooLong:
      return EnvironmentFault::kOversized;
    case LineProcess::Failure::kUnrequested:
      return EnvironmentFault::kGarbage;
    case LineProcess::Failure::kExited:
    case LineProcess::Failure::kOther:
    case LineProcess::Failure::kNone:
      break;
  }
  return EnvironmentFault::kCrash;
}

}  // namespace

CommandEnvironment::CommandEnvironment(CommandEnvironmentOptions options)
    : options_(std::move(options)),
      source_("command environment `" + options_.command + "`"),
      process_(options_.command, options_.max_reply_bytes) {
  check_input(
      std::isfinite(options_.timeout_s) && options_.timeout_s > 0 && options_.timeout_s <= 86400,
      "timeout_s must be in (0, 86400] seconds", source_);
  check_input(options_.max_reply_bytes >= 1024, "max_reply_bytes must be at least 1024", source_);
}

std::string CommandEnvironment::call(const std::string& request,
                                     std::optional<EnvironmentError>* error) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(options_.timeout_s));
  try {
    return process_.exchange({request}, deadline).at(0);
  } catch (const Error& e) {
    // exchange() killed the process on any failure; the next call starts a fresh one.
    *error = EnvironmentError{fault_of(process_.failure()), source_ + ": " + e.problem()};
    return {};
  }
}

ResetResult CommandEnvironment::reset(const nlohmann::ordered_json& row) {
  return episodes_.reset(row, [this](const std::string& request, std::optional<EnvironmentError>* error) {
    return call(request, error);
  });
}

StepResult CommandEnvironment::step(const std::string& turn) {
  return episodes_.step(turn, [this](const std::string& request, std::optional<EnvironmentError>* error) {
    return call(request, error);
  });
}

}  // namespace aspen::agent
