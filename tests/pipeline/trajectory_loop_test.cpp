// TrajectoryLoop and Trajectory (pipeline/trajectory_loop.h, trajectory.h): a multi-turn
// episode with the real calculator environment, the real Qwen3 tokenizer and template.
// The context of every turn is, token for token, the prompt plus exactly the tokens the
// "engine" produced plus the observation tokens, and equals the template's render of
// the whole conversation (no re-tokenization drift, issue #35 item 2); masks, versions
// and log-probs line up; faults end one trajectory with its error and never hang.
#include "aspen/pipeline/trajectory_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "aspen/agent/calculator_tool.h"
#include "aspen/agent/tools_environment.h"
#include "aspen/tokenizer/bpe_trainer.h"
#include "aspen/tokenizer/utf8.h"
#include "support/oracles.h"

namespace aspen::pipeline {
namespace {

using nlohmann::ordered_json;

std::shared_ptr<const Tokenizer> qwen3_tokenizer() {
  static const auto tokenizer = std::make_shared<const Tokenizer>(
      Tokenizer::from_file(testing::qwen3_tokenizer_dir() + "/tokenizer.json"));
  return tokenizer;
}

EnvironmentFactory calculator_environment(int max_turns = 4) {
  auto tools = std::make_shared<ToolBox>();
  tools->add(std::make_shared<CalculatorTool>());
  // The final answer scores 1 when it holds the row's answer.
  AnswerVerifier verifier = [](const std::string& answer, const ordered_json& row) {
    return answer.find(row.at("answer").get<std::string>()) != std::string::npos ? 1.0 : 0.0;
  };
  ToolsEnvironmentOptions options;
  options.max_turns = max_turns;
  std::shared_ptr<const ToolBox> box = tools;
  return [box, verifier, options] { return std::make_unique<ToolsEnvironment>(box, verifier, options); };
}

// A finished engine turn: `text` encoded, closed by <|im_end|>, at policy `version`.
Completion engine_turn(const Tokenizer& tokenizer, const std::string& text, int64_t version,
                       int64_t sample = 0) {
  Completion c;
  c.sample_index = sample;
  c.token_ids = tokenizer.encode(text);
  c.token_ids.push_back(*tokenizer.token_to_id("<|im_end|>"));
  for (size_t i = 0; i < c.token_ids.size(); ++i) {
    c.logprobs.push_back(-0.5F - static_cast<float>(i) * 0.01F);
    c.policy_versions.push_back(version);
  }
  c.finish_reason = FinishReason::kStop;
  return c;
}

// Polls until something is ready (the loop's threads run the environment).
void poll_until(TrajectoryLoop& loop, std::vector<TrajectoryLoop::NextTurn>& next,
                std::vector<TrajectoryLoop::Finished>& finished) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (next.empty() && finished.empty()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the loop never answered";
    loop.wait_ready(0.05);
    loop.poll(next, finished);
  }
}

TEST(TrajectoryLoop, ContextIsThePromptPlusTheEngineTokensPlusObservationsTokenForToken) {
  const auto tokenizer = qwen3_tokenizer();
  const ChatTemplate chat = ChatTemplate::builtin("qwen3");
  TrajectoryLoopOptions options;
  options.threads = 2;
  TrajectoryLoop loop(options, calculator_environment(), tokenizer, chat);
  const TrajectoryKey key{7, 3, 1};
  loop.start(key, ordered_json{{"prompt", "What is 123456789 * 987654321?"},
                               {"answer", "121932631112635269"}});
  std::vector<TrajectoryLoop::NextTurn> next;
  std::vector<TrajectoryLoop::Finished> finished;
  poll_until(loop, next, finished);
  ASSERT_EQ(next.size(), 1U);
  const std::vector<ChatMessage> user = {{"user", "What is 123456789 * 987654321?"}};
  const std::vector<ordered_json> tools = {CalculatorTool().schema()};
  EXPECT_EQ(next[0].context, tokenizer->encode(chat.render(user, true, true, tools)));
  EXPECT_EQ(next[0].turn, 0);
  EXPECT_EQ(next[0].max_tokens, options.max_turn_tokens);

  // Turn 1 calls the tool; its tokens are not the canonical encoding of its text (the
  // engine may sample any split): the context must keep them as they are.
  // With thinking the model writes its own think block (without it, Qwen3's template
  // renders an earlier turn without the empty block its generation prompt had: no
  // observation suffix can make the two agree, agent/observation_suffix.h).
  const std::string think = "<think>\nBig numbers: use the tool.\n</think>\n\n";
  const std::string call = think +
      "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": "
      "\"123456789 * 987654321\"}}\n</tool_call>";
  Completion first = engine_turn(*tokenizer, call, /*version=*/4, /*sample=*/1);
  const std::vector<TokenId> split = tokenizer->encode(" ");  // an odd but valid token
  first.token_ids.insert(first.token_ids.begin(), split.begin(), split.end());
  first.logprobs.insert(first.logprobs.begin(), split.size(), -3.0F);
  first.policy_versions.insert(first.policy_versions.begin(), split.size(), 4);
  const std::vector<TokenId> context_before = next[0].context;
  loop.turn_finished(key, first);
  next.clear();
  poll_until(loop, next, finished);
  ASSERT_EQ(next.size(), 1U);
  EXPECT_EQ(next[0].turn, 1);
  std::vector<TokenId> expected = context_before;
  expected.insert(expected.end(), first.token_ids.begin(), first.token_ids.end());
  const std::vector<TokenId>& context = next[0].context;
  ASSERT_GT(context.size(), expected.size());
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), context.begin()))
      << "the engine's tokens must be kept, never re-encoded";
  // Without the odd split, the whole context is the template's render of the episode.
  std::vector<ChatMessage> episode = user;
  ChatMessage assistant{"assistant", think};
  assistant.tool_calls = {{"calculator", ordered_json{{"expression", "123456789 * 987654321"}}}};
  episode.push_back(assistant);
  episode.push_back({"tool", "121932631112635269"});
  std::vector<TokenId> rendered = tokenizer->encode(chat.render(episode, true, true, tools));
  std::vector<TokenId> unsplit(context.begin(), context.begin() + static_cast<long>(context_before.size()));
  unsplit.insert(unsplit.end(), context.begin() + static_cast<long>(expected.size() - first.token_ids.size() + split.size()),
                 context.end());
  EXPECT_EQ(unsplit, rendered);

  // Turn 2 answers: done, the verifier's reward.
  loop.turn_finished(key, engine_turn(*tokenizer, "The product is 121932631112635269.", 5, 1));
  next.clear();
  poll_until(loop, next, finished);
  ASSERT_EQ(finished.size(), 1U);
  const Trajectory& t = finished[0].trajectory;
  EXPECT_EQ(t.end, TrajectoryEnd::kDone);
  EXPECT_TRUE(t.has_reward);
  EXPECT_EQ(t.reward, 1.0);
  EXPECT_EQ(t.turns(), 2);
  EXPECT_EQ(t.tool_calls, 1);
  EXPECT_EQ(t.tool_errors, 0);
  ASSERT_EQ(t.response.size(), t.loss_mask.size());
  ASSERT_EQ(t.response.size(), t.logprobs.size());
  ASSERT_EQ(t.response.size(), t.versions.size());
  // Model tokens: mask 1 with the engine's log-probs; observation tokens: mask 0, log-prob
  // 0, the version of the model token before them.
  const int64_t turn2 = t.turn_starts[1];
  for (int64_t i = 0; i < static_cast<int64_t>(t.response.size()); ++i) {
    const bool model = i < static_cast<int64_t>(first.token_ids.size()) || i >= turn2;
    EXPECT_EQ(t.loss_mask[i], model ? 1.0F : 0.0F) << i;
    if (!model) {
      EXPECT_EQ(t.logprobs[i], 0.0F);
      EXPECT_EQ(t.versions[i], 4);
    }
  }
  EXPECT_EQ(t.logprobs[0], -3.0F);
  EXPECT_EQ(t.versions.back(), 5);
  EXPECT_EQ(loop.waiting(), 0);
}

TEST(TrajectoryLoop, ATurnLimitEndsTheTrajectoryWithRewardZero) {
  const auto tokenizer = qwen3_tokenizer();
  TrajectoryLoopOptions options;
  options.max_turns = 1;
  TrajectoryLoop loop(options, calculator_environment(/*max_turns=*/8), tokenizer,
                      ChatTemplate::builtin("qwen3"));
  loop.start({1, 1, 0}, ordered_json{{"prompt", "2**10?"}, {"answer", "1024"}});
  std::vector<TrajectoryLoop::NextTurn> next;
  std::vector<TrajectoryLoop::Finished> finished;
  poll_until(loop, next, finished);
  loop.turn_finished({1, 1, 0},
                     engine_turn(*tokenizer,
                                 "<tool_call>\n{\"name\": \"calculator\", \"arguments\": "
                                 "{\"expression\": \"2**10\"}}\n</tool_call>",
                                 0));
  next.clear();
  poll_until(loop, next, finished);
  ASSERT_EQ(finished.size(), 1U);
  EXPECT_EQ(finished[0].trajectory.end, TrajectoryEnd::kMaxTurns);
  EXPECT_EQ(finished[0].trajectory.reward, 0.0);
  EXPECT_EQ(trajectory_end_name(finished[0].trajectory.end), "max_turns");
}

// Runs one tool-calling turn with the given budget; what the loop made of it.
void one_tool_turn(TrajectoryLoop& loop, const Tokenizer& tokenizer,
                   std::vector<TrajectoryLoop::NextTurn>& first,
                   std::vector<TrajectoryLoop::NextTurn>& next,
                   std::vector<TrajectoryLoop::Finished>& finished) {
  loop.start({1, 1, 0}, ordered_json{{"prompt", "2**10?"}, {"answer", "1024"}});
  poll_until(loop, first, finished);
  loop.turn_finished({1, 1, 0},
                     engine_turn(tokenizer,
                                 "<tool_call>\n{\"name\": \"calculator\", \"arguments\": "
                                 "{\"expression\": \"2**10\"}}\n</tool_call>",
                                 0));
  poll_until(loop, next, finished);
}

TEST(TrajectoryLoop, TheNextTurnGetsWhatTheTrajectoryBudgetLeaves) {
  const auto tokenizer = qwen3_tokenizer();
  TrajectoryLoopOptions options;
  options.max_turn_tokens = 150;
  options.max_trajectory_tokens = 180;
  TrajectoryLoop loop(options, calculator_environment(), tokenizer, ChatTemplate::builtin("qwen3"));
  std::vector<TrajectoryLoop::NextTurn> first, next;
  std::vector<TrajectoryLoop::Finished> finished;
  one_tool_turn(loop, *tokenizer, first, next, finished);
  ASSERT_EQ(next.size(), 1U);
  const auto response = static_cast<int64_t>(next[0].context.size() - first[0].context.size());
  EXPECT_GT(response, 30);  // the call and its observation
  EXPECT_EQ(next[0].max_tokens, 180 - response);
}

TEST(TrajectoryLoop, ATrajectoryWithNoRoomForAnotherTurnEndsAtItsTokenBudget) {
  const auto tokenizer = qwen3_tokenizer();
  TrajectoryLoopOptions options;
  options.max_turn_tokens = 30;
  options.max_trajectory_tokens = 30;
  TrajectoryLoop loop(options, calculator_environment(), tokenizer, ChatTemplate::builtin("qwen3"));
  std::vector<TrajectoryLoop::NextTurn> first, next;
  std::vector<TrajectoryLoop::Finished> finished;
  one_tool_turn(loop, *tokenizer, first, next, finished);
  ASSERT_TRUE(next.empty());
  ASSERT_EQ(finished.size(), 1U);
  EXPECT_EQ(finished[0].trajectory.end, TrajectoryEnd::kMaxTokens);
  EXPECT_TRUE(finished[0].trajectory.has_reward);
  EXPECT_EQ(finished[0].trajectory.reward, 0.0);
  EXPECT_GE(finished[0].trajectory.response.size(), 30U);
}

TEST(TrajectoryLoop, AMalformedCallWithMultiByteTextGetsAnErrorObservationAndGoesOn) {
  const auto tokenizer = qwen3_tokenizer();
  TrajectoryLoop loop(TrajectoryLoopOptions{}, calculator_environment(), tokenizer,
                      ChatTemplate::builtin("qwen3"));
  loop.start({1, 1, 0}, ordered_json{{"prompt", "2**10?"}, {"answer", "1024"}});
  std::vector<TrajectoryLoop::NextTurn> next;
  std::vector<TrajectoryLoop::Finished> finished;
  poll_until(loop, next, finished);
  // JSON broken inside multi-byte characters: the parser's error quotes the bytes it read.
  for (const std::string broken : {"{\"name\": \"calculator\", \"arguments\": {\"expression\": \"\xc3\xa9\xc3",
                                   "{\"name\": \xe2\x82\xac\xe2\x82\xac\xe2\x82\xac}"}) {
    next.clear();
    Completion turn = engine_turn(*tokenizer, "<tool_call>\n", 0);
    turn.token_ids.pop_back();  // re-closed below
    std::vector<TokenId> bytes = tokenizer->encode(std::string("x"));
    // The model's tokens may be any ids; here the broken text's own encoding (valid
    // UTF-8 up to the cut) followed by the close.
    std::string valid_prefix;
    utf8::append_lossy(broken, valid_prefix);
    for (TokenId id : tokenizer->encode(valid_prefix + "\n</tool_call>")) turn.token_ids.push_back(id);
    turn.token_ids.push_back(*tokenizer->token_to_id("<|im_end|>"));
    turn.logprobs.assign(turn.token_ids.size(), -1.0F);
    turn.policy_versions.assign(turn.token_ids.size(), 0);
    loop.turn_finished({1, 1, 0}, turn);
    poll_until(loop, next, finished);
    ASSERT_TRUE(finished.empty()) << finished[0].trajectory.error;
    ASSERT_EQ(next.size(), 1U);
  }
}

// An environment whose reset or step fails the way a broken process does.
// Which one fails at reset is decided by the row, not by creation order: the loop's
// threads create pooled environments concurrently and in no fixed order.
class BrokenEnvironment : public agent::Environment {
 public:
  std::string kind() const override { return "broken"; }
  agent::ResetResult reset(const ordered_json& row) override {
    if (row.value("reset_throws", false)) throw Error("cannot read the row", "broken environment");
    return agent::ResetResult{{{"user", "hi"}}, {}, std::nullopt, 0};
  }
  agent::StepResult step(const std::string&) override {
    return agent::failed_step(agent::EnvironmentFault::kGarbage, "env: reply is not JSON");
  }
};

TEST(TrajectoryLoop, AFailingEnvironmentEndsOnlyItsTrajectoryWithTheError) {
  const auto tokenizer = qwen3_tokenizer();
  TrajectoryLoop loop(TrajectoryLoopOptions{}, [] {
    return std::make_unique<BrokenEnvironment>();
  }, tokenizer, ChatTemplate::builtin("qwen3"));
  loop.start({1, 1, 0}, ordered_json{{"reset_throws", true}});
  loop.start({1, 1, 1}, ordered_json::object());  // step returns garbage
  std::vector<TrajectoryLoop::NextTurn> next;
  std::vector<TrajectoryLoop::Finished> finished;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (next.size() + finished.size() < 2) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    loop.wait_ready(0.05);
    loop.poll(next, finished);
  }
  ASSERT_EQ(finished.size(), 1U);
  EXPECT_EQ(finished[0].trajectory.end, TrajectoryEnd::kEnvironment);
  EXPECT_NE(finished[0].trajectory.error.find("cannot read the row"), std::string::npos);
  ASSERT_EQ(next.size(), 1U);
  loop.turn_finished(next[0].key, engine_turn(*tokenizer, "hello", 0, 1));
  next.clear();
  finished.clear();
  poll_until(loop, next, finished);
  ASSERT_EQ(finished.size(), 1U);
  EXPECT_EQ(finished[0].trajectory.end, TrajectoryEnd::kEnvironment);
  EXPECT_EQ(finished[0].trajectory.error, "env: reply is not JSON");
  EXPECT_EQ(finished[0].trajectory.turns(), 1);
}

TEST(TrajectoryLoop, ForgettingALeaseDropsItsTrajectoriesAndTheirCallsInFlight) {
  const auto tokenizer = qwen3_tokenizer();
  TrajectoryLoop loop(TrajectoryLoopOptions{}, calculator_environment(), tokenizer,
                      ChatTemplate::builtin("qwen3"));
  loop.start({1, 1, 0}, ordered_json{{"prompt", "1+1"}, {"answer", "2"}});
  loop.start({2, 1, 0}, ordered_json{{"prompt", "1+2"}, {"answer", "3"}});
  loop.forget(1);
  std::vector<TrajectoryLoop::NextTurn> next;
  std::vector<TrajectoryLoop::Finished> finished;
  poll_until(loop, next, finished);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  loop.poll(next, finished);
  ASSERT_EQ(next.size(), 1U);
  EXPECT_EQ(next[0].key.lease, 2);
  EXPECT_EQ(loop.waiting(), 0);
}

TEST(TrajectoryLoop, RefusesATokenizerWithoutTheEndOfTurnToken) {
  BpeTrainerOptions options;
  options.vocab_size = 300;
  options.special_tokens = {"<|endoftext|>"};
  const auto tokenizer = std::make_shared<const Tokenizer>(
      Tokenizer::from_json(train_bpe_tokenizer({"1+1=2", "2+2=4"}, options), "tiny"));
  EXPECT_THROW(TrajectoryLoop(TrajectoryLoopOptions{}, calculator_environment(), tokenizer,
                              ChatTemplate::builtin("qwen3")),
               Error);
}

}  // namespace
}  // namespace aspen::pipeline
