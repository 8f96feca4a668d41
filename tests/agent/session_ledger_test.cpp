// SessionLedger and AgentSessions under the real Qwen3 tokenizer and chat template: an
// agent that carries its conversation back honestly (assistant turns as the server
// returned them, tool messages added) extends the context as a token prefix, and the
// trained tokens are the engine's own; the template's thinking handling and agents that
// rewrite history split (or are refused); sessions refuse unknown, late and concurrent
// calls with their metrics.
#include "aspen/agent/session_ledger.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aspen/agent/agent_sessions.h"
#include "aspen/tokenizer/chat_template.h"
#include "aspen/tokenizer/tokenizer.h"
#include "support/oracles.h"

namespace aspen::agent {
namespace {

using nlohmann::ordered_json;

struct LedgerQwen3 {
  std::shared_ptr<const Tokenizer> tokenizer =
      std::make_shared<const Tokenizer>(Tokenizer::from_file(testing::qwen3_tokenizer_dir()));
  ChatTemplate chat = ChatTemplate::from_config(testing::qwen3_tokenizer_dir());
  TokenId im_end = *tokenizer->token_to_id("<|im_end|>");
};

const LedgerQwen3& ledger_qwen3() {
  static const LedgerQwen3 fixture;
  return fixture;
}

const std::vector<ordered_json> kLedgerTools = {ordered_json::parse(R"({"type": "function",
  "function": {"name": "calculator", "description": "Exact arithmetic.",
  "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
  "required": ["expression"]}}})")};

// What the engine generated for a turn: `text`'s tokens and the <|im_end|> it stopped on.
std::vector<TokenId> engine_turn(const std::string& text) {
  std::vector<TokenId> tokens = ledger_qwen3().tokenizer->encode(text);
  tokens.push_back(ledger_qwen3().im_end);
  return tokens;
}

void finish_turn(SessionLedger& ledger, const std::vector<TokenId>& tokens, int64_t version) {
  ledger.finish_call(tokens, std::vector<float>(tokens.size(), -0.5f),
                     std::vector<int64_t>(tokens.size(), version));
}

const std::string kTurn1 =
    "<think>\nThe operands are large; the calculator is exact.\n</think>\n\nLet me compute it.\n"
    "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": "
    "\"123456789 * 987654321\"}}\n</tool_call>";
const std::string kTurn2 = "<think>\nThe tool answered.\n</think>\n\nIt is 121932631112635269.";

// The assistant message an OpenAI client carries back for kTurn1: the content before the
// call (without the newline the template puts back) and the call (the server parses
// OpenAI's string arguments back into an object, as vLLM does before rendering).
ChatMessage turn1_as_carried_back() {
  ChatMessage message{"assistant",
                      "<think>\nThe operands are large; the calculator is exact.\n</think>\n\n"
                      "Let me compute it."};
  message.tool_calls.push_back(
      {"calculator", ordered_json::parse(R"({"expression": "123456789 * 987654321"})")});
  return message;
}

std::vector<ChatMessage> ledger_question() {
  return {{"system", "You are a careful assistant."}, {"user", "What is 123456789 * 987654321?"}};
}

TEST(SessionLedger, AnHonestToolEpisodeExtendsAsATokenPrefixUnderTheRealQwen3Template) {
  const LedgerQwen3& q = ledger_qwen3();
  ASSERT_EQ(q.chat.name(), "qwen3");
  SessionLedger ledger(*q.tokenizer, PrefixBreak::kSplit);
  std::vector<ChatMessage> messages = ledger_question();
  const std::string text1 = q.chat.render(messages, true, true, kLedgerTools);
  EXPECT_EQ(ledger.begin_call(text1), q.tokenizer->encode(text1));
  const std::vector<TokenId> out1 = engine_turn(kTurn1);
  finish_turn(ledger, out1, 3);

  messages.push_back(turn1_as_carried_back());
  messages.push_back({"tool", "121932631112635269"});
  const std::string text2 = q.chat.render(messages, true, true, kLedgerTools);
  const std::vector<TokenId> context1 = ledger.segments().back().context();
  const std::vector<TokenId> prompt2 = ledger.begin_call(text2);
  ASSERT_GT(prompt2.size(), context1.size());
  EXPECT_EQ(std::vector<TokenId>(prompt2.begin(), prompt2.begin() + context1.size()), context1);
  // Token for token, the whole conversation as the template renders it.
  EXPECT_EQ(prompt2, q.tokenizer->encode(text2));
  const std::vector<TokenId> out2 = engine_turn(kTurn2);
  finish_turn(ledger, out2, 4);

  ASSERT_EQ(ledger.segments().size(), 1u);
  EXPECT_EQ(ledger.prefix_breaks(), 0);
  const AgentSegment& segment = ledger.segments()[0];
  EXPECT_EQ(segment.prompt, q.tokenizer->encode(text1));
  ASSERT_EQ(segment.turns(), 2);
  const size_t observed = prompt2.size() - context1.size();
  EXPECT_EQ(segment.turn_starts,
            (std::vector<int64_t>{0, static_cast<int64_t>(out1.size() + observed)}));
  const size_t n = segment.response.size();
  ASSERT_EQ(n, out1.size() + observed + out2.size());
  ASSERT_EQ(segment.loss_mask.size(), n);
  ASSERT_EQ(segment.logprobs.size(), n);
  ASSERT_EQ(segment.versions.size(), n);
  for (size_t i = 0; i < n; ++i) {
    const bool model = i < out1.size() || i >= out1.size() + observed;
    EXPECT_EQ(segment.loss_mask[i], model ? 1.0f : 0.0f) << i;
    EXPECT_EQ(segment.logprobs[i], model ? -0.5f : 0.0f) << i;
    EXPECT_EQ(segment.versions[i], i < out1.size() + observed ? 3 : 4) << i;
  }
  // The environment's tokens are the tool message and the next generation prompt.
  const std::vector<TokenId> environment(segment.response.begin() + out1.size(),
                                         segment.response.begin() + out1.size() + observed);
  EXPECT_EQ(q.tokenizer->decode(environment),
            "\n<|im_start|>user\n<tool_response>\n121932631112635269\n</tool_response><|im_end|>\n"
            "<|im_start|>assistant\n");
}

// The engine sampled a non-canonical tokenization; the client's text is the same, so
// the call extends, and the trajectory keeps the engine's tokens where encoding the
// rendered conversation would have produced others.
TEST(SessionLedger, TrainsTheEnginesOwnTokensWhereReencodingWouldDiffer) {
  const LedgerQwen3& q = ledger_qwen3();
  SessionLedger ledger(*q.tokenizer, PrefixBreak::kSplit);
  std::vector<ChatMessage> messages = {{"user", "Say hello."}};
  ledger.begin_call(q.chat.render(messages, true, true));
  std::vector<TokenId> out;
  for (const char c : std::string("<think>\nEasy.\n</think>\n\nhello")) {
    const std::vector<TokenId> one = q.tokenizer->encode(std::string(1, c));
    out.insert(out.end(), one.begin(), one.end());
  }
  out.push_back(q.im_end);
  finish_turn(ledger, out, 0);
  messages.push_back({"assistant", "<think>\nEasy.\n</think>\n\nhello"});
  messages.push_back({"tool", "ok"});
  const std::string text2 = q.chat.render(messages, true, true);
  const std::vector<TokenId> prompt2 = ledger.begin_call(text2);
  EXPECT_EQ(ledger.prefix_breaks(), 0);
  EXPECT_NE(prompt2, q.tokenizer->encode(text2));  // re-encoding would not extend
  const AgentSegment& segment = ledger.segments().back();
  EXPECT_EQ(std::vector<TokenId>(segment.response.begin(), segment.response.begin() + out.size()),
            out);
  EXPECT_EQ(q.tokenizer->decode(prompt2), text2);
}

// Qwen3 with enable_thinking=false puts an empty <think> block in the generation prompt
// but drops it when it re-renders that turn: the model saw it, the next rendering does
// not have it. Every later call therefore starts a new segment, counted as a break.
TEST(SessionLedger, Qwen3WithoutThinkingSplitsAtEveryTurnAndCountsIt) {
  const LedgerQwen3& q = ledger_qwen3();
  SessionLedger ledger(*q.tokenizer, PrefixBreak::kSplit);
  std::vector<ChatMessage> messages = ledger_question();
  ledger.begin_call(q.chat.render(messages, true, false, kLedgerTools));
  const std::string call =
      "<tool_call>\n{\"name\": \"calculator\", \"arguments\": "
      "{\"expression\": \"123456789 * 987654321\"}}\n</tool_call>";
  finish_turn(ledger, engine_turn(call), 0);
  ChatMessage carried{"assistant", ""};
  carried.tool_calls.push_back(
      {"calculator", ordered_json::parse(R"({"expression": "123456789 * 987654321"})")});
  messages.push_back(carried);
  messages.push_back({"tool", "121932631112635269"});
  const std::string text2 = q.chat.render(messages, true, false, kLedgerTools);
  EXPECT_EQ(text2.find("<think>\n\n</think>\n\n<tool_call>"), std::string::npos);
  EXPECT_EQ(ledger.begin_call(text2), q.tokenizer->encode(text2));
  finish_turn(ledger, engine_turn("It is 121932631112635269."), 1);
  EXPECT_EQ(ledger.prefix_breaks(), 1);
  ASSERT_EQ(ledger.segments().size(), 2u);
  EXPECT_EQ(ledger.segments()[0].turns(), 1);
  EXPECT_EQ(ledger.segments()[1].turns(), 1);
  EXPECT_EQ(ledger.segments()[1].prompt, q.tokenizer->encode(text2));
  EXPECT_EQ(ledger.turns(), 2);
}

TEST(SessionLedger, AnAgentThatRewritesHistoryIsSplitOrRefusedPerTheOption) {
  const LedgerQwen3& q = ledger_qwen3();
  const std::string answer = "<think>\nFirst.\n</think>\n\nThe full first answer.";
  std::vector<ChatMessage> messages = ledger_question();
  std::vector<ChatMessage> edited = messages;
  edited.push_back({"assistant", "<think>\nFirst.\n</think>\n\nA summary of it."});
  edited.push_back({"tool", "more"});
  messages.push_back({"assistant", answer});
  messages.push_back({"tool", "more"});
  const std::string first = q.chat.render(ledger_question(), true, true);

  SessionLedger split(*q.tokenizer, PrefixBreak::kSplit);
  split.begin_call(first);
  finish_turn(split, engine_turn(answer), 0);
  split.begin_call(q.chat.render(edited, true, true));
  EXPECT_EQ(split.prefix_breaks(), 0);  // counted once the split call produced a turn
  finish_turn(split, engine_turn("Going on."), 0);
  EXPECT_EQ(split.prefix_breaks(), 1);
  EXPECT_EQ(split.segments().size(), 2u);

  SessionLedger refuse(*q.tokenizer, PrefixBreak::kRefuse);
  refuse.begin_call(first);
  finish_turn(refuse, engine_turn(answer), 0);
  try {
    refuse.begin_call(q.chat.render(edited, true, true));
    FAIL() << "a rewritten history was accepted";
  } catch (const PrefixBroken& error) {
    EXPECT_NE(std::string(error.what()).find("does not extend"), std::string::npos);
  }
  EXPECT_EQ(refuse.prefix_breaks(), 1);
  EXPECT_FALSE(refuse.call_open());
  // The session is as it was: the honest conversation still extends it.
  const std::string honest = q.chat.render(messages, true, true);
  EXPECT_EQ(refuse.begin_call(honest), q.tokenizer->encode(honest));
  EXPECT_EQ(refuse.segments().size(), 1u);
}

TEST(SessionLedger, ACancelledCallLeavesTheContextAsItWasAndCallsDoNotOverlap) {
  const LedgerQwen3& q = ledger_qwen3();
  SessionLedger ledger(*q.tokenizer, PrefixBreak::kSplit);
  std::vector<ChatMessage> messages = {{"user", "Hi."}};
  const std::string text1 = q.chat.render(messages, true, true);
  ledger.begin_call(text1);
  EXPECT_THROW(ledger.begin_call(text1), CallInProgress);
  ledger.cancel_call();
  EXPECT_TRUE(ledger.segments().empty());
  ledger.begin_call(text1);
  finish_turn(ledger, engine_turn("<think>\nGreet.\n</think>\n\nHello."), 0);
  messages.push_back({"assistant", "<think>\nGreet.\n</think>\n\nHello."});
  messages.push_back({"tool", "bye"});
  const std::string text2 = q.chat.render(messages, true, true);
  const std::vector<TokenId> prompt2 = ledger.begin_call(text2);
  ledger.cancel_call();
  const AgentSegment before = ledger.segments().back();
  EXPECT_GT(prompt2.size(), before.context().size());
  EXPECT_EQ(ledger.begin_call(text2), prompt2);  // the retry gets the same prompt
  ledger.cancel_call();
  EXPECT_EQ(ledger.segments().back().response, before.response);
  EXPECT_EQ(ledger.segments().size(), 1u);
  EXPECT_EQ(ledger.turns(), 1);
  EXPECT_THROW(finish_turn(ledger, engine_turn("x"), 0), Error);  // no call open
}

TEST(AgentSessions, RefusesUnknownLateAndConcurrentCallsWithTheirMetrics) {
  const LedgerQwen3& q = ledger_qwen3();
  AgentSessions sessions(q.tokenizer, PrefixBreak::kSplit);
  const std::string id = sessions.open();
  const std::string other = sessions.open();
  EXPECT_EQ(id.size(), 32u);
  EXPECT_NE(id, other);
  EXPECT_EQ(sessions.open_sessions(), 2);
  const std::string text = q.chat.render({{"user", "Hi."}}, true, true);
  auto refusal = [&](const std::string& session) {
    try {
      sessions.begin_call(session, text);
    } catch (const SessionRefused& refused) {
      return std::make_pair(refused.status(), refused.metric());
    }
    return std::make_pair(200, std::string("accepted"));
  };
  EXPECT_EQ(refusal("not-a-session"),
            std::make_pair(403, std::string("agent_unknown_session_calls")));
  EXPECT_EQ(refusal(id), std::make_pair(200, std::string("accepted")));
  EXPECT_EQ(refusal(id), std::make_pair(409, std::string("agent_concurrent_calls")));
  const std::vector<TokenId> out = engine_turn("<think>\n\n</think>\n\nHello.");
  sessions.finish_call(id, out, std::vector<float>(out.size(), -1.0f),
                       std::vector<int64_t>(out.size(), 7));
  EXPECT_EQ(refusal(other), std::make_pair(200, std::string("accepted")));

  const ClosedSession closed = sessions.close(id);
  EXPECT_FALSE(closed.call_in_flight);
  ASSERT_EQ(closed.segments.size(), 1u);
  EXPECT_EQ(closed.turns, 1);
  EXPECT_EQ(closed.segments[0].response, out);
  EXPECT_EQ(refusal(id), std::make_pair(409, std::string("agent_late_calls")));
  EXPECT_THROW(sessions.close(id), Error);

  // A call in flight when its session closes: the trajectory ends without it.
  const ClosedSession cut = sessions.close(other);
  EXPECT_TRUE(cut.call_in_flight);
  EXPECT_TRUE(cut.segments.empty());
  sessions.finish_call(other, out, std::vector<float>(out.size(), -1.0f),
                       std::vector<int64_t>(out.size(), 7));
  const std::map<std::string, int64_t> metrics = sessions.metrics();
  EXPECT_EQ(metrics.at("agent_calls"), 2);
  EXPECT_EQ(metrics.at("agent_unknown_session_calls"), 1);
  EXPECT_EQ(metrics.at("agent_late_calls"), 1);
  EXPECT_EQ(metrics.at("agent_concurrent_calls"), 1);
  EXPECT_EQ(metrics.at("agent_prefix_breaks"), 0);
  EXPECT_EQ(sessions.open_sessions(), 0);
}

TEST(AgentSessions, ACallPastTheTokenLimitIsRefusedAndTheSessionKeepsItsTrajectory) {
  const LedgerQwen3& q = ledger_qwen3();
  std::vector<ChatMessage> messages = {{"user", "Hi."}};
  const std::string text1 = q.chat.render(messages, true, true);
  const int64_t limit = static_cast<int64_t>(q.tokenizer->encode(text1).size()) + 12;
  AgentSessions sessions(q.tokenizer, PrefixBreak::kSplit, {0, limit});
  const std::string id = sessions.open();
  sessions.begin_call(id, text1);
  const std::vector<TokenId> out = engine_turn("<think>\nGreet.\n</think>\n\nHello.");
  sessions.finish_call(id, out, std::vector<float>(out.size(), -1.0f),
                       std::vector<int64_t>(out.size(), 0));
  messages.push_back({"assistant", "<think>\nGreet.\n</think>\n\nHello."});
  messages.push_back({"tool", "a long observation that takes the context past the limit"});
  try {
    sessions.begin_call(id, q.chat.render(messages, true, true));
    FAIL() << "a call past the token limit was accepted";
  } catch (const SessionRefused& refused) {
    EXPECT_EQ(refused.metric(), "agent_token_limit");
    EXPECT_EQ(refused.status(), 400);
  }
  const ClosedSession closed = sessions.close(id);
  EXPECT_FALSE(closed.call_in_flight);
  ASSERT_EQ(closed.segments.size(), 1u);
  EXPECT_EQ(closed.segments[0].response, out);
  EXPECT_EQ(sessions.metrics().at("agent_token_limit"), 1);
}

}  // namespace
}  // namespace aspen::agent
