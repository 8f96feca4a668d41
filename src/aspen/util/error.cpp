#include "aspen/util/error.h"

namespace aspen {
namespace {

std::string format_message(const std::string& problem, const std::string& input,
                           const std::string& hint) {
  std::string message = input.empty() ? problem : input + ": " + problem;
  if (!hint.empty()) message += " (hint: " + hint + ")";
  return message;
}

}  // namespace

Error::Error(std::string problem, std::string input, std::string hint)
    : std::runtime_error(format_message(problem, input, hint)),
      problem_(std::move(problem)),
      input_(std::move(input)),
      hint_(std::move(hint)) {}

}  // namespace aspen
