#include "aspen/agent/calculator_tool.h"

#include "aspen/agent/imports.h"

namespace aspen::agent {

CalculatorTool::CalculatorTool(CalculatorLimits limits) : limits_(limits) {
  schema_ = {
      {"type", "function"},
      {"function",
       {{"name", name_},
        // No digits in the schema: every prompt carries it, and a small model learning
        // to copy the user's operands into a call was misled by the example numbers an
        // earlier description had (docs/benchmarks.md, "Multi-turn RL with a tool"). The
        // size limit is stated in the error a too-large result gets.
        {"description",
         "Evaluates an arithmetic expression exactly: integers of any size, the operators "
         "+ - * / // % ** and parentheses as in Python, / giving an exact fraction."},
        {"parameters",
         {{"type", "object"},
          {"properties",
           {{"expression",
             {{"type", "string"},
              {"description", "The expression to evaluate"}}}}},
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
