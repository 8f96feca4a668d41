// CalculatorTool ("calculator"): the built-in exact-arithmetic tool. Arguments:
// {"expression": "<expression>"} in calculator_expression.h's language (Python's integer
// operators; "/" exact). Its observation is the value ("121932631112635269", "-7/2"),
// or "error: ..." for a malformed expression, a division by zero, a result over the size
// limit, or arguments that are not exactly {"expression": string}.
// Thread safety: stateless; call() is safe concurrently.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "aspen/agent/calculator_expression.h"
#include "aspen/agent/imports.h"
#include "aspen/agent/tool.h"

namespace aspen::agent {

class CalculatorTool : public Tool {
 public:
  explicit CalculatorTool(CalculatorLimits limits = {});

  const std::string& name() const override { return name_; }
  const nlohmann::ordered_json& schema() const override { return schema_; }
  ToolResult call(const nlohmann::ordered_json& arguments) const override;

 private:
  std::string name_ = "calculator";
  CalculatorLimits limits_;
  nlohmann::ordered_json schema_;
};

}  // namespace aspen::agent
