// The built-in tools environment (agent/tools_environment.h): calculator episodes from a
// data row to a verified final answer, error observations, and each limit (turns,
// observation bytes, tool timeout) hit and counted.
#include "aspen/agent/tools_environment.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "aspen/agent/calculator_tool.h"
#include "aspen/util/error.h"

namespace aspen::agent {
namespace {

using nlohmann::ordered_json;

std::string call(const std::string& name, const std::string& arguments_json) {
  return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + arguments_json +
         "}\n</tool_call>";
}

std::string calculate(const std::string& expression) {
  return call("calculator", "{\"expression\": \"" + expression + "\"}");
}

// Scores 1 when the answer contains the row's "answer".
double contains_answer(const std::string& answer, const ordered_json& row) {
  return answer.find(row.at("answer").get<std::string>()) != std::string::npos ? 1.0 : 0.0;
}

// Waits until released (or 5 s), then echoes; for the timeout.
class SlowTool : public Tool {
 public:
  explicit SlowTool(std::shared_ptr<std::atomic<bool>> released) : released_(std::move(released)) {}
  const std::string& name() const override { return name_; }
  const ordered_json& schema() const override { return schema_; }
  ToolResult call(const ordered_json&) const override {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!*released_ && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return ToolResult::success("finally");
  }

 private:
  std::shared_ptr<std::atomic<bool>> released_;
  std::string name_ = "slow";
  ordered_json schema_ = {{"type", "function"}, {"function", {{"name", "slow"}}}};
};

// Returns its "text" argument: observations of any size and content.
class EchoTool : public Tool {
 public:
  const std::string& name() const override { return name_; }
  const ordered_json& schema() const override { return schema_; }
  ToolResult call(const ordered_json& arguments) const override {
    return ToolResult::success(arguments.at("text").get<std::string>());
  }

 private:
  std::string name_ = "echo";
  ordered_json schema_ = {{"type", "function"}, {"function", {{"name", "echo"}}}};
};

std::shared_ptr<const ToolBox> calculator_box() {
  auto box = std::make_shared<ToolBox>();
  box->add(std::make_shared<CalculatorTool>());
  return box;
}

TEST(ToolsEnvironmentTest, CalculatorEpisodeEndsInAVerifiedAnswer) {
  ToolsEnvironment env(calculator_box(), contains_answer);
  const ResetResult start = env.reset(
      {{"prompt", "What is 2**100 + 3**50?"}, {"answer", "1267651318126217093349291975625"}});
  ASSERT_FALSE(start.error);
  ASSERT_EQ(start.messages.size(), 1u);
  EXPECT_EQ(start.messages[0].role, "user");
  EXPECT_EQ(start.messages[0].content, "What is 2**100 + 3**50?");
  ASSERT_EQ(start.tools.size(), 1u);
  EXPECT_EQ(start.tools[0]["function"]["name"], "calculator");

  const StepResult tools =
      env.step("Let me compute.\n" + calculate("2**100") + "\n" + calculate("3**50"));
  EXPECT_FALSE(tools.done);
  EXPECT_FALSE(tools.error);
  EXPECT_FALSE(tools.reward);
  ASSERT_EQ(tools.observations.size(), 2u);
  EXPECT_EQ(tools.observations[0].role, "tool");
  EXPECT_EQ(tools.observations[0].content, "1267650600228229401496703205376");
  EXPECT_EQ(tools.observations[1].content, "717897987691852588770249");
  EXPECT_EQ(tools.metrics.tool_calls, 2);
  EXPECT_EQ(tools.metrics.tool_errors, 0);
  EXPECT_EQ(tools.metrics.observation_bytes, 31u + 24u);

  const StepResult answer = env.step("The sum is 1267651318126217093349291975625.");
  EXPECT_TRUE(answer.done);
  EXPECT_FALSE(answer.error);
  EXPECT_TRUE(answer.observations.empty());
  EXPECT_EQ(answer.reward, 1.0);
  EXPECT_EQ(env.turns(), 2);

  // The next episode starts fresh; a wrong answer scores 0.
  env.reset({{"messages", {{{"role", "user"}, {"content", "2+2?"}}}}, {"answer", "4"}});
  EXPECT_EQ(env.step("5").reward, 0.0);
}

TEST(ToolsEnvironmentTest, MalformedAndUnknownCallsAreErrorObservations) {
  ToolsEnvironment env(calculator_box(), contains_answer);
  env.reset({{"prompt", "?"}, {"answer", "x"}});
  const StepResult result = env.step(calculate("1/0") +
                                     "\n<tool_call>\n{\"name\": \"calculator\", "
                                     "\"arguments\": [1]}\n</tool_call>\n" +
                                     call("search", "{\"q\": \"x\"}") + "\n" + calculate("6*7"));
  EXPECT_FALSE(result.done);
  ASSERT_EQ(result.observations.size(), 4u);
  EXPECT_EQ(result.observations[0].content, "error: division by zero");
  EXPECT_EQ(result.observations[1].content.rfind("error: ", 0), 0u);
  EXPECT_EQ(result.observations[2].content,
            "error: unknown tool 'search'; the tools are: calculator");
  EXPECT_EQ(result.observations[3].content, "42");
  EXPECT_EQ(result.metrics.tool_calls, 4);
  EXPECT_EQ(result.metrics.tool_errors, 3);
}

TEST(ToolsEnvironmentTest, MaxTurnsEndsTheEpisodeWithoutRunningTheCalls) {
  int verified = 0;
  ToolsEnvironment env(calculator_box(),
                       [&](const std::string&, const ordered_json&) { return ++verified, 1.0; },
                       {/*max_turns=*/2});
  env.reset({{"prompt", "?"}});
  const StepResult first = env.step(calculate("1+1"));
  EXPECT_FALSE(first.done);
  EXPECT_FALSE(first.metrics.max_turns_reached);
  const StepResult second = env.step(calculate("2+2"));
  EXPECT_TRUE(second.done);
  EXPECT_TRUE(second.metrics.max_turns_reached);
  EXPECT_EQ(second.reward, 0.0);
  EXPECT_TRUE(second.observations.empty());
  EXPECT_EQ(second.metrics.tool_calls, 0);
  EXPECT_EQ(verified, 0);
  // The episode is over: a further step is refused, not run.
  const StepResult third = env.step("4");
  ASSERT_TRUE(third.error);
  EXPECT_EQ(third.error->fault, EnvironmentFault::kRefused);
  EXPECT_EQ(verified, 0);
}

TEST(ToolsEnvironmentTest, ToolTimeoutIsAnErrorObservationAndTheEpisodeGoesOn) {
  auto released = std::make_shared<std::atomic<bool>>(false);
  auto box = std::make_shared<ToolBox>();
  box->add(std::make_shared<SlowTool>(released));
  box->add(std::make_shared<CalculatorTool>());
  ToolsEnvironmentOptions options;
  options.tool_timeout_s = 0.05;
  ToolsEnvironment env(box, contains_answer, options);
  env.reset({{"prompt", "?"}, {"answer", "x"}});
  const auto start = std::chrono::steady_clock::now();
  const StepResult result = env.step(call("slow", "{}") + "\n" + calculate("6*7"));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  released->store(true);  // lets the abandoned call end
  ASSERT_EQ(result.observations.size(), 2u);
  EXPECT_EQ(result.observations[0].content, "error: tool 'slow' timed out after 0.05 s");
  EXPECT_EQ(result.observations[1].content, "42");
  EXPECT_EQ(result.metrics.tool_timeouts, 1);
  EXPECT_EQ(result.metrics.tool_errors, 1);
  EXPECT_FALSE(result.done);
  EXPECT_LT(waited, 1.0);
  EXPECT_GE(result.metrics.wait_seconds, 0.05);
}

TEST(ToolsEnvironmentTest, LongObservationsAreCutAtACharacterBoundary) {
  auto box = std::make_shared<ToolBox>();
  box->add(std::make_shared<EchoTool>());
  ToolsEnvironmentOptions options;
  options.max_observation_bytes = 51;
  ToolsEnvironment env(box, contains_answer, options);
  env.reset({{"prompt", "?"}, {"answer", "x"}});
  std::string accents;
  for (int i = 0; i < 100; ++i) accents += "\xc3\xa9";  // é, two bytes
  const StepResult result = env.step(call("echo", "{\"text\": \"" + accents + "\"}") +
                                     call("echo", "{\"text\": \"ok\"}"));
  ASSERT_EQ(result.observations.size(), 2u);
  // Byte 51 is inside the 26th é: 25 whole ones are kept.
  EXPECT_EQ(result.observations[0].content,
            accents.substr(0, 50) + "\n[observation truncated: showed the first 50 of 200 bytes]");
  EXPECT_EQ(result.observations[1].content, "ok");
  EXPECT_EQ(result.metrics.observations_truncated, 1);
  EXPECT_EQ(result.metrics.observation_bytes, result.observations[0].content.size() + 2);
}

TEST(ToolsEnvironmentTest, BadRowsThrowAndAFailingVerifierEndsTheTrajectory) {
  ToolsEnvironment env(calculator_box(), [](const std::string&, const ordered_json&) -> double {
    throw std::runtime_error("no answer field");
  });
  EXPECT_THROW(env.reset({{"question", "?"}}), Error);
  EXPECT_THROW(env.reset({{"messages", {{{"role", 3}}}}}), Error);
  const StepResult before = env.step("4");
  ASSERT_TRUE(before.error);
  EXPECT_EQ(before.error->fault, EnvironmentFault::kRefused);
  env.reset({{"prompt", "2+2?"}});
  const StepResult result = env.step("4");
  EXPECT_TRUE(result.done);
  ASSERT_TRUE(result.error);
  EXPECT_FALSE(result.reward);
  EXPECT_EQ(result.error->message, "tools environment: the verifier failed: no answer field");
  EXPECT_THROW(ToolsEnvironment(nullptr, contains_answer), Error);
  EXPECT_THROW(ToolsEnvironment(calculator_box(), nullptr), Error);
  EXPECT_THROW(ToolsEnvironment(calculator_box(), contains_answer, {/*max_turns=*/0}), Error);
}

}  // namespace
}  // namespace aspen::agent
