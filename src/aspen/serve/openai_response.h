// The OpenAI-compatible response bodies `aspen serve` writes: whole responses, the
// server-sent-event chunks of a streamed one, and error bodies, in the shapes of
// OpenAI's API (which the official `openai` client parses):
//   completions: {"id":"cmpl-..","object":"text_completion","created","model",
//                 "choices":[{"index","text","logprobs","finish_reason"}],"usage"}
//   chat:        {"id":"chatcmpl-..","object":"chat.completion", ...
//                 "choices":[{"index","message":{"role":"assistant","content"},
//                             "logprobs","finish_reason"}],"usage"}
//   chunks:      "text_completion" / "chat.completion.chunk" objects with the text delta
//                (chat: "delta":{"role"?, "content"?}); finish_reason on a choice's last.
//   errors:      {"error":{"message","type","param","code"}}
// Choice index = prompt index x n + sample index, as vLLM numbers them.
// Log-probs are the sampled tokens' temperature-1 log-probs (no top-N alternatives):
// completions {"tokens","token_logprobs","top_logprobs":null,"text_offset"}, chat
// {"content":[{"token","logprob","bytes","top_logprobs":[]}]}.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "aspen/serve/imports.h"
#include "aspen/serve/openai_request.h"

namespace aspen::serve {

// One sampled token as a client sees it.
struct TokenLogprob {
  std::string token;  // its text alone (U+FFFD for part of a character)
  float logprob = 0.0f;
};

struct ChoiceResult {
  std::string text;
  std::vector<TokenLogprob> tokens;  // filled when logprobs were asked for
  std::string finish_reason;         // "stop" | "length" | "tool_calls"
  // Chat with tools (agent endpoint): the calls parsed out of the reply, in OpenAI's
  // shape (chat_tool_reply.h); `text` is then the content beside them. null: none.
  nlohmann::json tool_calls;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// Identity of one response: its id and the fields every chunk repeats.
struct ResponseHeader {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string id;
  int64_t created = 0;  // Unix seconds
  std::string model;
};

nlohmann::json response_body(const ResponseHeader& header, const std::vector<ChoiceResult>& choices,
                             bool logprobs, const Usage& usage);

// One streamed chunk of choice `index`: a text delta (chat: with the role when
// `first`), the tokens behind it when logprobs were asked for, and the finish reason on
// the choice's last chunk. `text_offset`: bytes of this choice sent before the delta.
nlohmann::json chunk_body(const ResponseHeader& header, int64_t index, const std::string& delta,
                          const std::vector<TokenLogprob>* tokens, int64_t text_offset,
                          bool first, const std::optional<std::string>& finish_reason);
// The final chunk with usage only (stream_options.include_usage): no choices.
nlohmann::json usage_chunk_body(const ResponseHeader& header, const Usage& usage);

nlohmann::json error_body(int status, const std::string& message, const std::string& param);
// The body as sent: JSON text in which any invalid UTF-8 (a client's bad bytes quoted
// in an error message, a completion cut inside a multi-byte character) becomes U+FFFD,
// as vLLM sends it, instead of failing the dump (which would turn a 400 into a 500).
std::string wire_text(const nlohmann::json& body);
// "data: <json>\n\n"
std::string sse_event(const nlohmann::json& body);

}  // namespace aspen::serve
