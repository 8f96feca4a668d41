// The calculator tool's expressions (agent/calculator_expression.h). Input: an
// expression, any bytes. Checks: evaluation never throws and gives exactly one of a
// value and an error; a value ("-7/2", "12") is itself an expression that evaluates to
// the same value, which ties the printing of BigInteger/BigRational to their parsing.
// Limits are smaller than the tool's so that each input stays fast under the sanitizers.
#include <exception>
#include <string>

#include "aspen/agent/calculator_expression.h"
#include "fuzz_common.h"

namespace {

aspen::agent::CalculatorResult evaluate(const std::string& text) {
  aspen::agent::CalculatorLimits limits;
  limits.max_digits = 2000;
  limits.max_seconds = 5;
  try {
    return aspen::agent::evaluate_calculator_expression(text, limits);
  } catch (const std::exception& e) {
    aspen::fuzz::defect(std::string("evaluate_calculator_expression threw ") +
                        aspen::fuzz::type_name(typeid(e)) + ": " + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const aspen::agent::CalculatorResult result = evaluate(text);
  aspen::fuzz::require(result.value.has_value() == result.error.empty(),
                       "exactly one of a value and an error");
  if (result.value) {
    const aspen::agent::CalculatorResult again = evaluate(*result.value);
    aspen::fuzz::require(again.value == result.value, "a printed value evaluates to itself");
  }
  return 0;
}
