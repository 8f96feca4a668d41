#include "aspen/agent/calculator_tool.h"

#include "aspen/agent/imports.h"

namespace aspen::agent {

CalculatorTool::CalculatorTool(CalculatorLimits limits) : limits_(limits) {
  schema_ = {
      {"type", "function"},
      {"function",
       {{"name", name_},
        {"description",
         "Evaluates an arithmetic expression exactly, with integers of any size (up to " +
             std::to_string(limits_.max_digits) +
             " digits). Operators: + - * / // % ** and parentheses, as in Python, except that "
             "/ is exact division: a result that is not whole is a fraction such as 7/2."},
        {"parameters",
         {{"type", "object"},
          {"properties",
           {{"expression",
             {{"type", "string"},
              {"description", "The expression, for example (123456789 * 987654321) ** 2 // 7"}}}}},
          {"required", {"expression"}}}}}}};
}

ToolResult CalculatorTool::call(const nlohmann::ordered_json& arguments) const {
  const char* usage = "the calculator takes {\"expression\": \"...\"}";
  if (!arguments.is_object() || !arguments.contains("expression") ||
      !arguments["expression"].is_string()) {
    return ToolResult::failure(std::string("missing string argument \"expression\"; ") + usage);
  }
  for (const auto& [key, value] : arguments.items()) {
    if (key != "expression")
      return ToolResult::failure("unexpected argument \"" + key + "\"; " + usage);
  }
  const CalculatorResult result = evaluate_calculator_expression(
      arguments["expression"].get_ref<const std::string&>(), limits_);
  return result.value ? ToolResult::success(*result.value) : ToolResult::failure(result.error);
}

}  // namespace aspen::agent
