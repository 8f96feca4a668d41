#include "aspen/agent/session_ledger.h"

#include <algorithm>

#include "aspen/agent/imports.h"

namespace aspen::agent {
namespace {

// Up to 40 bytes of `text` from `at`, for the one-line error of a refused call.
std::string excerpt(const std::string& text, size_t at) {
  if (at >= text.size()) return "(end of text)";
  std::string part = text.substr(at, 40);
  for (char& c : part) {
    if (c == '\n') c = ' ';
  }
  return "\"" + part + "\"";
}

}  // namespace

std::vector<TokenId> AgentSegment::context() const {
  std::vector<TokenId> tokens = prompt;
  tokens.insert(tokens.end(), response.begin(), response.end());
  return tokens;
}

SessionLedger::SessionLedger(const Tokenizer& tokenizer, PrefixBreak on_break)
    : tokenizer_(tokenizer), on_break_(on_break) {}

void SessionLedger::start_segment(const std::string& prompt_text) {
  AgentSegment segment;
  segment.prompt = tokenizer_.encode(prompt_text);
  segments_.push_back(std::move(segment));
  context_text_ = prompt_text;
}

std::vector<TokenId> SessionLedger::begin_call(const std::string& prompt_text) {
  if (call_open_) {
    throw CallInProgress("the session's previous call has not finished; an agent holds one "
                         "call of its episode at a time",
                         "session");
  }
  call_started_segment_ = false;
  text_before_call_ = context_text_;
  if (segments_.empty()) {
    start_segment(prompt_text);
    call_started_segment_ = true;
  } else if (prompt_text.size() < context_text_.size() ||
             prompt_text.compare(0, context_text_.size(), context_text_) != 0) {
    if (on_break_ == PrefixBreak::kRefuse) {
      ++prefix_breaks_;
      const auto [mine, theirs] =
          std::mismatch(context_text_.begin(), context_text_.end(), prompt_text.begin(),
                        prompt_text.end());
      const size_t at = static_cast<size_t>(mine - context_text_.begin());
      (void)theirs;
      throw PrefixBroken("the conversation does not extend the session's context: at byte " +
                             std::to_string(at) + " the engine saw " +
                             excerpt(context_text_, at) + ", the request renders " +
                             excerpt(prompt_text, at),
                         "messages");
    }
    start_segment(prompt_text);
    call_started_segment_ = true;
  }
  AgentSegment& segment = segments_.back();
  response_before_ = segment.response.size();
  if (!call_started_segment_) {
    // The environment's tokens: the rest of the rendered text, after what the engine saw.
    const std::vector<TokenId> added = tokenizer_.encode(prompt_text.substr(context_text_.size()));
    const int64_t version = segment.versions.empty() ? 0 : segment.versions.back();
    segment.response.insert(segment.response.end(), added.begin(), added.end());
    segment.logprobs.insert(segment.logprobs.end(), added.size(), 0.0f);
    segment.versions.insert(segment.versions.end(), added.size(), version);
    segment.loss_mask.insert(segment.loss_mask.end(), added.size(), 0.0f);
    context_text_ = prompt_text;
  }
  call_open_ = true;
  return segment.context();
}

void SessionLedger::finish_call(const std::vector<TokenId>& generated,
                                const std::vector<float>& logprobs,
                                const std::vector<int64_t>& versions, int64_t tool_calls,
                                int64_t tool_errors) {
  check_input(call_open_, "a generation was recorded with no call open", "session ledger");
  check_input(logprobs.size() == generated.size() && versions.size() == generated.size(),
              "the generation's tokens, log-probs and versions differ in length",
              "session ledger");
  call_open_ = false;
  AgentSegment& segment = segments_.back();
  // A split counts once its call produced a turn: a retried call that broke is one break.
  if (call_started_segment_ && segments_.size() > 1) ++prefix_breaks_;
  segment.turn_starts.push_back(static_cast<int64_t>(segment.response.size()));
  segment.response.insert(segment.response.end(), generated.begin(), generated.end());
  segment.logprobs.insert(segment.logprobs.end(), logprobs.begin(), logprobs.end());
  segment.versions.insert(segment.versions.end(), versions.begin(), versions.end());
  segment.loss_mask.insert(segment.loss_mask.end(), generated.size(), 1.0f);
  segment.tool_calls += tool_calls;
  segment.tool_errors += tool_errors;
  context_text_ += tokenizer_.decode(generated, /*skip_special_tokens=*/false);
}

void SessionLedger::cancel_call() {
  if (!call_open_) return;
  call_open_ = false;
  context_text_ = std::move(text_before_call_);
  if (call_started_segment_) {
    segments_.pop_back();
    return;
  }
  AgentSegment& segment = segments_.back();
  segment.response.resize(response_before_);
  segment.logprobs.resize(response_before_);
  segment.versions.resize(response_before_);
  segment.loss_mask.resize(response_before_);
}

int64_t SessionLedger::turns() const {
  int64_t turns = 0;
  for (const AgentSegment& segment : segments_) turns += segment.turns();
  return turns;
}

}  // namespace aspen::agent
