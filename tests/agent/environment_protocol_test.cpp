// The external environments' JSON protocol (agent/environment_protocol.h): requests as
// one line each, and every reply shape it accepts or refuses, without a process.
#include "aspen/agent/environment_protocol.h"

#include <gtest/gtest.h>

#include <string>

namespace aspen::agent {
namespace {

using nlohmann::ordered_json;

const std::string kSource = "test environment";

TEST(EnvironmentProtocolTest, RequestsAreSingleLinesKeepingTheRowsKeyOrder) {
  const ordered_json row = {{"zeta", 1}, {"alpha", {{"b", 2}, {"a", 1}}}};
  EXPECT_EQ(
      reset_request("e-1", row),
      "{\"op\":\"reset\",\"episode\":\"e-1\",\"row\":{\"zeta\":1,\"alpha\":{\"b\":2,\"a\":1}}}");
  // Model output may not be valid UTF-8; newlines are escaped, so it stays one line.
  EXPECT_EQ(step_request("e-1", "a\nb\xff"),
            "{\"op\":\"step\",\"episode\":\"e-1\",\"turn\":\"a\\nb\xef\xbf\xbd\"}");
  const std::string first = new_episode_id();
  const std::string second = new_episode_id();
  EXPECT_NE(first, second);
  EXPECT_EQ(first.substr(0, 17), second.substr(0, 17));  // one random prefix per process
  EXPECT_EQ(first[16], '-');
}

TEST(EnvironmentProtocolTest, ParsesResetReplies) {
  const ResetResult ok = parse_reset_reply(
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
          "tools": [{"type": "function", "function": {"name": "f"}}], "extension": 1})",
      kSource);
  ASSERT_FALSE(ok.error);
  ASSERT_EQ(ok.messages.size(), 2u);
  EXPECT_EQ(ok.messages[1].content, "u");
  ASSERT_EQ(ok.tools.size(), 1u);
  EXPECT_EQ(ok.tools[0]["function"]["name"], "f");

  for (const char* garbage :
       {"", "null", "[1]", "{\"messages\": []}", "{\"tools\": []}",
        "{\"messages\": [{\"role\": \"user\"}], \"tools\": {}}",
        "{\"messages\": [{\"content\": \"no role\"}]}", "{\"messages\": [1]}"}) {
    const ResetResult result = parse_reset_reply(garbage, kSource);
    ASSERT_TRUE(result.error) << garbage;
    EXPECT_EQ(result.error->fault, EnvironmentFault::kGarbage) << garbage;
    EXPECT_EQ(result.error->message.rfind(kSource + ": ", 0), 0u);
    EXPECT_TRUE(result.messages.empty());
  }
  const ResetResult refused = parse_reset_reply(R"({"error": "no such task"})", kSource);
  ASSERT_TRUE(refused.error);
  EXPECT_EQ(refused.error->fault, EnvironmentFault::kRefused);
  EXPECT_EQ(refused.error->message, "test environment: no such task");
}

TEST(EnvironmentProtocolTest, ParsesStepReplies) {
  const StepResult going = parse_step_reply(
      R"({"observations": [{"role": "tool", "content": "42"}, {"role": "user", "content": "ok?"}],
          "done": false, "turn_reward": 0.25})",
      kSource);
  ASSERT_FALSE(going.error);
  EXPECT_FALSE(going.done);
  ASSERT_EQ(going.observations.size(), 2u);
  EXPECT_EQ(going.observations[0].role, "tool");
  EXPECT_EQ(going.turn_reward, 0.25);
  EXPECT_FALSE(going.reward);
  EXPECT_EQ(going.metrics.observation_bytes, 5u);

  const StepResult done = parse_step_reply(R"({"done": true, "reward": -3})", kSource);
  ASSERT_FALSE(done.error);
  EXPECT_TRUE(done.done);
  EXPECT_EQ(done.reward, -3.0);
}

TEST(EnvironmentProtocolTest, RefusesStepRepliesOfTheWrongShape) {
  const struct {
    const char* reply;
    const char* says;
  } cases[] = {
      {"not json", "reply is not JSON"},
      {"[]", "reply is not a JSON object"},
      {R"({"observations": [{"role": "tool", "content": "1"}]})", "done: missing or not a bool"},
      {R"({"done": "yes", "reward": 1})", "done: missing or not a bool"},
      {R"({"done": true})", "a step that is done has no reward"},
      {R"({"done": true, "reward": 1, "observations": [{"role": "user", "content": "x"}]})",
       "observations in a step that is done"},
      {R"({"done": false})", "no observations in a step that is not done"},
      {R"({"done": false, "reward": 1, "observations": [{"role": "tool", "content": "1"}]})",
       "a reward in a step that is not done"},
      {R"({"done": false, "observations": [{"role": "assistant", "content": "1"}]})",
       "an observation has role 'assistant'"},
      {R"({"done": true, "reward": "1"})", "\"reward\" is not a number in [-1e6, 1e6]"},
      {R"({"done": true, "reward": 2e6})", "\"reward\" is not a number in [-1e6, 1e6]"},
      {R"({"done": true, "reward": 1, "turn_reward": null})", "\"turn_reward\" is not a number"},
      {R"({"done": true, "reward": 1, "done": false})", "duplicate key"},
  };
  for (const auto& c : cases) {
    const StepResult result = parse_step_reply(c.reply, kSource);
    EXPECT_TRUE(result.done) << c.reply;
    EXPECT_FALSE(result.reward) << c.reply;
    ASSERT_TRUE(result.error) << c.reply;
    EXPECT_EQ(result.error->fault, EnvironmentFault::kGarbage) << c.reply;
    EXPECT_NE(result.error->message.find(c.says), std::string::npos) << result.error->message;
  }
  const StepResult refused = parse_step_reply(R"({"error": {"code": 7}})", kSource);
  ASSERT_TRUE(refused.error);
  EXPECT_EQ(refused.error->fault, EnvironmentFault::kRefused);
  EXPECT_EQ(refused.error->message, "test environment: {\"code\":7}");
  EXPECT_TRUE(refused.done);
  // A long reply is quoted to 200 bytes.
  const StepResult long_garbage = parse_step_reply(std::string(5000, 'x'), kSource);
  EXPECT_LT(long_garbage.error->message.size(), 600u);
}

}  // namespace
}  // namespace aspen::agent
