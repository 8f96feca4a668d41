// observation_suffix (agent/observation_suffix.h): prompt + the model's turns + the
// suffixes is, byte for byte, the chat template's render of the whole episode, so that a
// trajectory built from engine tokens and suffix tokens is what the template would show
// the model (issue #35, item 2); with the tools environment and the real Qwen3
// tokenizer, token for token.
#include "aspen/agent/observation_suffix.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aspen/agent/calculator_tool.h"
#include "aspen/agent/tools_environment.h"
#include "aspen/tokenizer/python_json.h"
#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/error.h"
#include "support/oracles.h"

namespace aspen::agent {
namespace {

using nlohmann::ordered_json;

ToolCall calculator_call(const std::string& expression) {
  return {"calculator", ordered_json{{"expression", expression}}};
}

// A turn as the model writes it: its think block, content, then each call as the Qwen
// templates print an assistant turn's tool_calls (a newline before each block but a
// first one that follows no content).
std::string turn_text(const std::string& think, const std::string& content,
                      const std::vector<ToolCall>& calls) {
  std::string text = think + content;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0 || !content.empty()) text += "\n";
    text += "<tool_call>\n{\"name\": \"" + calls[i].name +
            "\", \"arguments\": " + python_json_dumps(calls[i].arguments) + "}\n</tool_call>";
  }
  return text;
}

struct Episode {
  std::vector<ChatMessage> prompt;
  // Per model turn: the assistant message, the text the model generated, and the
  // observations that followed it.
  struct Step {
    ChatMessage assistant;
    std::string turn;
    std::vector<ChatMessage> observations;
  };
  std::vector<Step> steps;
};

Episode tool_episode(bool thinking) {
  const std::string think1 = thinking ? "<think>\nBig numbers: use the tool.\n</think>\n\n" : "";
  const std::string think2 = thinking ? "<think>\nNow the sum.\n</think>\n\n" : "";
  const std::vector<ToolCall> calls1 = {calculator_call("2**100"), calculator_call("3**50")};
  const std::vector<ToolCall> calls2 = {calculator_call("1267650600228229401496703205376 + 1")};
  Episode episode;
  episode.prompt = {{"system", "You are terse."}, {"user", "What is 2**100 + 3**50?"}};
  episode.steps.push_back(
      {{"assistant", think1 + "I will compute.", calls1},
       turn_text(think1, "I will compute.", calls1),
       {{"tool", "1267650600228229401496703205376"}, {"tool", "717897987691852588770249"}}});
  episode.steps.push_back({{"assistant", think2, calls2},
                           turn_text(think2, "", calls2),
                           {{"tool", "1267650600228229401496703205377"}}});
  return episode;
}

const std::vector<ordered_json> kTools = {
    {{"type", "function"},
     {"function",
      {{"name", "calculator"},
       {"description", "Exact arithmetic."},
       {"parameters",
        {{"type", "object"}, {"properties", {{"expression", {{"type", "string"}}}}}}}}}}};

// The context built as the token contract says, against the render of the whole episode.
void expect_contract_holds(const ChatTemplate& chat, const Episode& episode, bool enable_thinking) {
  std::string context = chat.render(episode.prompt, true, enable_thinking, kTools);
  std::vector<ChatMessage> whole = episode.prompt;
  for (const Episode::Step& step : episode.steps) {
    const ObservationSuffix suffix = observation_suffix(chat, step.observations, enable_thinking);
    EXPECT_EQ(suffix.end_of_turn, "<|im_end|>");
    context += step.turn + suffix.text();
    whole.push_back(step.assistant);
    whole.insert(whole.end(), step.observations.begin(), step.observations.end());
    EXPECT_EQ(context, chat.render(whole, true, enable_thinking, kTools))
        << chat.name() << " after " << whole.size() << " messages";
  }
}

TEST(ObservationSuffixTest, ToolEpisodeRendersAsTheWholeConversation) {
  expect_contract_holds(ChatTemplate::builtin("qwen2.5"), tool_episode(false), true);
  expect_contract_holds(ChatTemplate::builtin("qwen3"), tool_episode(true), true);
}

TEST(ObservationSuffixTest, ToolResponsesShareOneUserTurn) {
  const ObservationSuffix suffix = observation_suffix(
      ChatTemplate::builtin("qwen3"), {{"tool", "42"}, {"tool", "error: division by zero"}});
  EXPECT_EQ(suffix.rest,
            "\n<|im_start|>user\n<tool_response>\n42\n</tool_response>\n<tool_response>\n"
            "error: division by zero\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
}

TEST(ObservationSuffixTest, Qwen3WithoutThinkingEndsInTheEmptyThinkBlock) {
  // The context keeps the empty think block the generation prompt put before each turn;
  // a re-render would drop it from earlier turns, which is why the contract appends
  // instead of re-rendering. The tail after the last turn is still the template's.
  const ChatTemplate qwen3 = ChatTemplate::builtin("qwen3");
  const Episode episode = tool_episode(false);
  const ObservationSuffix suffix = observation_suffix(qwen3, episode.steps[0].observations, false);
  const std::string prompt = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  ASSERT_GE(suffix.rest.size(), prompt.size());
  EXPECT_EQ(suffix.rest.substr(suffix.rest.size() - prompt.size()), prompt);
  std::vector<ChatMessage> whole = episode.prompt;
  whole.push_back(episode.steps[0].assistant);
  whole.insert(whole.end(), episode.steps[0].observations.begin(),
               episode.steps[0].observations.end());
  const std::string rendered = qwen3.render(whole, true, false, kTools);
  const std::string tail = episode.steps[0].turn + suffix.text();
  ASSERT_GE(rendered.size(), tail.size());
  EXPECT_EQ(rendered.substr(rendered.size() - tail.size()), tail);
}

TEST(ObservationSuffixTest, UserObservationOpensAUserTurn) {
  // An environment that answers in words (a simulated user, a judge's feedback).
  Episode episode;
  episode.prompt = {{"user", "Name a prime over 100."}};
  episode.steps.push_back({{"assistant", "91"}, "91", {{"user", "91 = 7 * 13. Try again."}}});
  episode.steps.push_back({{"assistant", "101"}, "101", {{"user", "Correct. Another one?"}}});
  expect_contract_holds(ChatTemplate::builtin("qwen2.5"), episode, true);
  expect_contract_holds(ChatTemplate::builtin("qwen3"), episode, true);
  EXPECT_EQ(observation_suffix(ChatTemplate::builtin("chatml"), {{"user", "Again."}}).rest,
            "\n<|im_start|>user\nAgain.<|im_end|>\n<|im_start|>assistant\n");
}

// Issue #35 item 2, token for token: a calculator episode driven by the tools environment
// under the real Qwen3 tokenizer and template. The prompt's tokens, the model's, and the
// suffixes' of the environment's observations (with or without the <|im_end|> the engine
// stopped on) are exactly the tokens of the whole conversation, so a suffix tokenized on
// its own never merges with what the model wrote.
TEST(ObservationSuffixTest, Qwen3CalculatorEpisodeTokenForToken) {
  const Tokenizer tokenizer = Tokenizer::from_file(testing::qwen3_tokenizer_dir());
  const ChatTemplate chat = ChatTemplate::from_config(testing::qwen3_tokenizer_dir());
  ASSERT_EQ(chat.name(), "qwen3");
  const std::optional<TokenId> im_end = tokenizer.token_to_id("<|im_end|>");
  ASSERT_TRUE(im_end);
  auto box = std::make_shared<ToolBox>();
  box->add(std::make_shared<CalculatorTool>());
  ToolsEnvironment env(box, [](const std::string& answer, const ordered_json& row) {
    return answer.find(row.at("answer").get<std::string>()) != std::string::npos ? 1.0 : 0.0;
  });
  const Episode episode = tool_episode(true);
  const ResetResult start =
      env.reset({{"messages",
                  {{{"role", "system"}, {"content", episode.prompt[0].content}},
                   {{"role", "user"}, {"content", episode.prompt[1].content}}}},
                 {"answer", "1267650600228229401496703205377"}});
  ASSERT_FALSE(start.error);
  const auto append = [&](std::vector<TokenId>& tokens, const std::string& text) {
    const std::vector<TokenId> more = tokenizer.encode(text);
    tokens.insert(tokens.end(), more.begin(), more.end());
  };
  std::vector<TokenId> stopped_by_eos =
      tokenizer.encode(chat.render(start.messages, true, true, start.tools));
  std::vector<TokenId> stopped_by_string = stopped_by_eos;
  std::vector<ChatMessage> whole = start.messages;
  for (const Episode::Step& step : episode.steps) {
    const StepResult result = env.step(step.turn);
    ASSERT_FALSE(result.done);
    ASSERT_EQ(result.observations.size(), step.observations.size());
    for (size_t i = 0; i < result.observations.size(); ++i) {
      EXPECT_EQ(result.observations[i].content, step.observations[i].content);
    }
    const ObservationSuffix suffix = observation_suffix(chat, result.observations);
    append(stopped_by_eos, step.turn);
    stopped_by_eos.push_back(*im_end);  // generated: the engine's stop token
    append(stopped_by_eos, suffix.rest);
    append(stopped_by_string, step.turn);
    append(stopped_by_string, suffix.text());
    whole.push_back(step.assistant);
    whole.insert(whole.end(), result.observations.begin(), result.observations.end());
    const std::vector<TokenId> expected =
        tokenizer.encode(chat.render(whole, true, true, start.tools));
    EXPECT_EQ(stopped_by_eos, expected) << "after " << whole.size() << " messages";
    EXPECT_EQ(stopped_by_string, expected) << "after " << whole.size() << " messages";
  }
  const StepResult answer =
      env.step("<think>\nThat is the sum.\n</think>\n\n1267650600228229401496703205377");
  EXPECT_TRUE(answer.done);
  EXPECT_EQ(answer.reward, 1.0);
}

TEST(ObservationSuffixTest, RefusesNoObservationsAndOtherRoles) {
  const ChatTemplate qwen3 = ChatTemplate::builtin("qwen3");
  EXPECT_THROW(observation_suffix(qwen3, {}), Error);
  EXPECT_THROW(observation_suffix(qwen3, {{"assistant", "hi"}}), Error);
  EXPECT_THROW(observation_suffix(qwen3, {{"system", "be nice"}}), Error);
}

}  // namespace
}  // namespace aspen::agent
