#include "aspen/agent/environment.h"

#include "aspen/agent/imports.h"

namespace aspen::agent {

std::string environment_fault_name(EnvironmentFault fault) {
  switch (fault) {
    case EnvironmentFault::kNone:
      return "none";
    case EnvironmentFault::kCrash:
      return "crash";
    case EnvironmentFault::kTimeout:
      return "timeout";
    case EnvironmentFault::kGarbage:
      return "garbage";
    case EnvironmentFault::kOversized:
      return "oversized";
    case EnvironmentFault::kRefused:
      return "refused";
  }
  return "unknown";
}

StepResult failed_step(EnvironmentFault fault, std::string message) {
  StepResult result;
  result.done = true;
  result.error = EnvironmentError{fault, std::move(message)};
  return result;
}

}  // namespace aspen::agent
