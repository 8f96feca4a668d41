// The tool interface, the calculator tool and ToolBox (agent/tool.h, calculator_tool.h,
// tool_box.h): schemas as the chat template shows them, results and error observations,
// and a model's turn taken from text to one observation per call.
#include "aspen/agent/tool_box.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "aspen/agent/calculator_tool.h"
#include "aspen/agent/tool_call_parser.h"
#include "aspen/tokenizer/python_json.h"
#include "aspen/util/error.h"

namespace aspen::agent {
namespace {

using nlohmann::ordered_json;

TEST(CalculatorToolTest, SchemaIsAnOpenAIFunction) {
  const CalculatorTool calculator;
  EXPECT_EQ(calculator.name(), "calculator");
  EXPECT_EQ(python_json_dumps(calculator.schema()),
            "{\"type\": \"function\", \"function\": {\"name\": \"calculator\", \"description\": "
            "\"Evaluates an arithmetic expression exactly: integers of any size, the operators "
            "+ - * / // % ** and parentheses as in Python, / giving an exact fraction.\", "
            "\"parameters\": {\"type\": \"object\", \"properties\": {\"expression\": {\"type\": "
            "\"string\", \"description\": \"The expression to evaluate\"}}, \"required\": "
            "[\"expression\"]}}}");
}

TEST(CalculatorToolTest, ResultsAndErrorObservations) {
  const CalculatorTool calculator;
  const ToolResult product = calculator.call({{"expression", "123456789 * 987654321"}});
  EXPECT_TRUE(product.ok);
  EXPECT_EQ(product.text, "121932631112635269");
  const ToolResult zero = calculator.call({{"expression", "1 / (3 - 3)"}});
  EXPECT_FALSE(zero.ok);
  EXPECT_EQ(zero.text, "error: division by zero");
  EXPECT_EQ(calculator.call(ordered_json::object()).text,
            "error: missing string argument \"expression\"; the calculator takes "
            "{\"expression\": \"...\"}");
  EXPECT_EQ(calculator.call({{"expression", 12}}).text.rfind("error: missing string argument", 0),
            0u);
  EXPECT_EQ(calculator.call({{"expression", "1"}, {"precision", 3}}).text,
            "error: unexpected argument \"precision\"; the calculator takes "
            "{\"expression\": \"...\"}");
}

class ThrowingTool : public Tool {
 public:
  const std::string& name() const override { return name_; }
  const ordered_json& schema() const override { return schema_; }
  ToolResult call(const ordered_json&) const override { throw std::runtime_error("disk on fire"); }

 private:
  std::string name_ = "broken";
  ordered_json schema_ = {{"type", "function"}, {"function", {{"name", "broken"}}}};
};

ToolBox make_box() {
  ToolBox box;
  box.add(std::make_shared<CalculatorTool>());
  box.add(std::make_shared<ThrowingTool>());
  return box;
}

TEST(ToolBoxTest, SchemasInOrderAndUniqueNames) {
  ToolBox box = make_box();
  ASSERT_EQ(box.schemas().size(), 2u);
  EXPECT_EQ(box.schemas()[0]["function"]["name"], "calculator");
  EXPECT_EQ(box.schemas()[1]["function"]["name"], "broken");
  EXPECT_EQ(box.names(), (std::vector<std::string>{"calculator", "broken"}));
  EXPECT_THROW(box.add(std::make_shared<CalculatorTool>()), Error);
  EXPECT_THROW(box.add(nullptr), Error);
  EXPECT_EQ(box.find("python"), nullptr);
}

TEST(ToolBoxTest, EveryCallOfATurnGetsOneObservation) {
  const ToolBox box = make_box();
  const ParsedTurn turn = parse_tool_calls(
      "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2**64\"}}\n"
      "</tool_call>\n<tool_call>{\"name\": \"search\", \"arguments\": {}}</tool_call>"
      "<tool_call>{\"name\": \"broken\"}</tool_call><tool_call>{\"name\": calculator}</tool_call>"
      "<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1/0\"}}");
  ASSERT_EQ(turn.calls.size(), 5u);
  std::vector<ToolResult> results;
  for (const ParsedToolCall& call : turn.calls) results.push_back(box.execute(call));
  EXPECT_TRUE(results[0].ok);
  EXPECT_EQ(results[0].text, "18446744073709551616");
  EXPECT_EQ(results[1].text, "error: unknown tool 'search'; the tools are: calculator, broken");
  EXPECT_EQ(results[2].text, "error: tool 'broken' failed: disk on fire");
  EXPECT_EQ(results[3].text.rfind("error: invalid tool call: malformed JSON: ", 0), 0u);
  EXPECT_EQ(results[4].text, "error: unterminated <tool_call>: the turn ended before </tool_call>");
  for (size_t i = 1; i < results.size(); ++i) EXPECT_FALSE(results[i].ok) << i;
}

}  // namespace
}  // namespace aspen::agent
