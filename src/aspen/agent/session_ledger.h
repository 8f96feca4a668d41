// SessionLedger: the tokens one bring-your-own-agent session trains on (issue #35, item
// 5). An agent program holds its episode through /v1/chat/completions; each call sends
// the whole conversation again, which the server renders with the chat template (tools,
// generation prompt). The ledger turns those calls into the trajectory Aspen trains on:
//
//   segment = prompt                  the first call's rendered prompt       (no loss)
//             + generated turn 1      the engine's tokens, log-probs, versions (mask 1)
//             + environment tokens    what the next call's rendered prompt adds after
//                                     the end of turn 1: end of turn, tool/user
//                                     messages, the next generation prompt   (mask 0)
//             + generated turn 2 ...
//
// The prefix rule. A call continues the segment only when its rendered prompt extends
// the context the engine has seen (the segment's prompt and every turn since). It is
// checked on the text those context tokens stand for (decoded with special tokens, so
// "<|im_end|>" counts) against the rendered text, and the prompt the engine then
// continues is the context's OWN tokens plus the tokens of the rest of the rendered
// text. So the trained tokens are exactly the tokens the engine generated, never
// re-tokenized, and each call's prompt extends the previous context as a token prefix
// by construction. Why not compare re-encoded tokens instead: the model samples
// non-canonical tokenizations (" hel" + "lo" where encode gives " hello") at
// temperature 1, and every such turn would break a token comparison although the agent
// carried the conversation back honestly.
//
// What breaks it: anything that makes the rendered text differ from what the engine saw
// - an agent that edits, drops or summarises earlier messages; a stop string (cut from
// the text the client gets, kept in the tokens); the qwen3 template dropping the empty
// <think> block of an earlier turn (enable_thinking=false) or the reasoning of turns
// before the last user message. Then, per PrefixBreak:
//   kSplit  (default): the segment ends and a new one starts from this call's prompt,
//           encoded afresh; prefix_breaks() counts it (metric agent_prefix_breaks). A run
//           trains the last segment with the session's reward (a dock row is one
//           sequence: pipeline/agent_loop.h) and counts the others.
//   kRefuse: begin_call throws PrefixBroken; the call is answered with an error and the
//           session keeps its segment as it was.
//
// Protocol: begin_call(text) -> the prompt tokens to generate from; then exactly one of
// finish_call(generated tokens, log-probs, versions) or cancel_call() (the generation
// failed or its client went away: the context stays as it was). One call at a time:
// begin_call while a call is open throws CallInProgress.
//
// Thread safety: none; AgentSessions serialises the calls of many sessions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aspen/agent/imports.h"
#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/error.h"

namespace aspen::agent {

// One trajectory of a session: the fields of pipeline::Trajectory (prompt, response,
// logprobs, versions, loss_mask, turn_starts), which the rollout side copies over.
struct AgentSegment {
  std::vector<TokenId> prompt;
  std::vector<TokenId> response;     // generated and environment tokens, in order
  std::vector<float> logprobs;       // per response token; 0 for environment tokens
  std::vector<int64_t> versions;     // per response token; environment tokens carry the
                                     // version of the model token before them
  std::vector<float> loss_mask;      // per response token: 1 generated, 0 environment
  std::vector<int64_t> turn_starts;  // offset of each generated turn in `response`
  // The <tool_call> blocks of its turns the endpoint parsed (chat_tool_reply.h), and how
  // many of them were malformed (returned to the agent as plain text).
  int64_t tool_calls = 0;
  int64_t tool_errors = 0;

  int64_t turns() const { return static_cast<int64_t>(turn_starts.size()); }
  // prompt + response: what the engine has seen so far.
  std::vector<TokenId> context() const;
};

enum class PrefixBreak { kSplit, kRefuse };

// begin_call's refusal under PrefixBreak::kRefuse; what() says where the texts differ.
class PrefixBroken : public Error {
 public:
  using Error::Error;
};
// begin_call while the session's previous call has not finished.
class CallInProgress : public Error {
 public:
  using Error::Error;
};

class SessionLedger {
 public:
  // `tokenizer` outlives the ledger.
  SessionLedger(const Tokenizer& tokenizer, PrefixBreak on_break);

  // A call whose rendered prompt (template, tools, generation prompt) is `prompt_text`:
  // returns the tokens the engine must continue.
  std::vector<TokenId> begin_call(const std::string& prompt_text);
  // The call's generation: its tokens (as the engine generated them, the stop token
  // included), their rollout log-probs and policy versions, and the tool calls parsed
  // out of it. aspen::Error when no call is open or the three lengths differ.
  void finish_call(const std::vector<TokenId>& generated, const std::vector<float>& logprobs,
                   const std::vector<int64_t>& versions, int64_t tool_calls = 0,
                   int64_t tool_errors = 0);
  void cancel_call();

  bool call_open() const { return call_open_; }
  // Every segment, in order; each holds at least one turn, except the last while its
  // first call is open.
  const std::vector<AgentSegment>& segments() const { return segments_; }
  int64_t turns() const;  // generated turns over all segments
  int64_t prefix_breaks() const { return prefix_breaks_; }

 private:
  void start_segment(const std::string& prompt_text);

  const Tokenizer& tokenizer_;
  PrefixBreak on_break_;
  std::vector<AgentSegment> segments_;
  // The text the last segment's context() stands for: its rendered prompt and, per
  // turn, the decoded generated tokens (special tokens kept) and the environment text.
  std::string context_text_;
  // The state before the open call, which cancel_call restores: the context text, the
  // segment's response length, and whether the call started a segment.
  std::string text_before_call_;
  size_t response_before_ = 0;
  bool call_started_segment_ = false;
  bool call_open_ = false;
  int64_t prefix_breaks_ = 0;
};

}  // namespace aspen::agent
