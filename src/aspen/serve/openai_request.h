// The OpenAI-compatible request bodies `aspen serve` accepts, parsed once into a
// ServeRequest (token prompts + SamplingParams), with the field meanings of OpenAI's
// API and vLLM's extensions:
//
//   /v1/completions       prompt (string | [string] | [int] | [[int]]), max_tokens (16)
//   /v1/chat/completions  messages ([{role, content: string | [{type: "text", text}]}]),
//                         max_tokens or max_completion_tokens (default: what the context
//                         leaves), chat_template_kwargs.enable_thinking (Qwen3)
//   both                  model, n, temperature, top_p, stop (string | [string]), seed,
//                         stream, stream_options.include_usage, user;
//                         vLLM's top_k, min_p, min_tokens, ignore_eos, stop_token_ids;
//                         completions: logprobs (0 only) and echo (false only);
//                         chat: logprobs (bool) and top_logprobs (0 only).
// Sampling fields that are absent take the model's generation_config.json values
// (temperature, top_p, top_k), else OpenAI's defaults, as vLLM does.
//
// Decisions, each refused with a 400 that names the field rather than silently ignored:
// top-N alternatives (logprobs > 0, top_logprobs > 0) are not computed; penalties,
// logit_bias, echo, suffix, best_of != n, tools (even []) and tool_choice (except on the
// agent endpoint: ServeContext::tool_calls) are not
// implemented; unknown fields are errors (a misspelt "temprature" must not sample at
// the default); a request asking for more than ServeContext::max_request_tokens
// generated tokens in all is refused, naming n.
//
// Errors: RequestError (an aspen::Error) whose input() is the field, with the HTTP
// status to answer: 400 for a bad field, 404 for a model this server does not serve
// (neither the base model's name nor an adapter's; the message lists those it serves).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "aspen/rollout/sampling_params.h"
#include "aspen/serve/imports.h"
#include "aspen/tokenizer/chat_template.h"
#include "aspen/tokenizer/tokenizer.h"
#include "aspen/util/error.h"

namespace aspen::serve {

class RequestError : public Error {
 public:
  RequestError(int status, std::string problem, std::string field)
      : Error(std::move(problem), std::move(field)), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

// A LoRA adapter served beside the base model (`aspen serve --lora NAME=DIR`), as
// vLLM's --lora-modules: requests whose "model" is `name` are answered with it.
struct ServedAdapter {
  std::string name;
  std::string path;  // the adapter's directory (GET /v1/models' "root", as vLLM)
};

// What the server knows that requests are checked and rendered against.
struct ServeContext {
  std::string model_name;             // the base model's served name
  std::vector<ServedAdapter> adapters;  // names distinct from model_name and each other
  std::shared_ptr<const Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;  // nullopt: /v1/chat/completions is refused
  int64_t max_model_len = 0;                  // prompt + generated tokens, at most
  SamplingParams defaults;                    // generation_config.json's sampling values
  // The most tokens one request may ask the engine to generate, n x prompts x max_tokens
  // (0: no bound). `aspen serve` sets --max-num-seqs x max_model_len, one full batch of
  // the engine: a request cannot queue more work than the engine holds at once, so one
  // client cannot keep the engine busy for many batches' worth while others wait.
  int64_t max_request_tokens = 0;
  // The bring-your-own-agent endpoint (agent_endpoint.h) sets this: chat requests may
  // then carry `tools` (function schemas, rendered by the template as HF does, in the
  // client's key order), tool_choice "auto" or "none", assistant messages with
  // `tool_calls` and "tool" messages, and replies carry the calls parsed out of the
  // generated text (agent_tool_reply.h). Tool calls' string arguments (OpenAI's wire
  // form) are parsed back into objects before rendering, as vLLM does, so that the
  // template prints them as the model wrote them. Streaming with tools is refused
  // (the calls are parsed from the whole reply). `aspen serve` leaves it off and keeps
  // refusing tools (docs/serve.md).
  bool tool_calls = false;
  // The agent endpoint serves one policy: any `model` names it (programs written for
  // other endpoints keep their model name). Off: an unknown name is a 404.
  bool any_model_name = false;
};

enum class Endpoint { kCompletions, kChatCompletions };

struct ServeRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;  // the served name asked for: model_name (also when absent) or an adapter's
  std::vector<std::vector<TokenId>> prompts;  // chat: exactly one
  SamplingParams params;                      // max_tokens resolved per prompt at submit
  bool max_tokens_given = false;              // chat without it: the context's remainder
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  std::string user;         // the request's `user` field ("" when absent)
  // Chat: the rendered prompt, whose tokens prompts[0] holds (the agent endpoint's
  // session ledger extends the session's context with it: agent/session_ledger.h).
  std::string prompt_text;
  bool parse_tool_calls = false;  // chat with tools and tool_choice other than "none"
};

// The most samples one request may ask for (n x prompts), as a bound on work.
constexpr int64_t kMaxSamplesPerRequest = 1024;

ServeRequest parse_completion_request(const nlohmann::json& body, const ServeContext& context);
// `ordered_body`: the same body parsed as ordered_json, which ServeContext::tool_calls
// needs (tool schemas and arguments keep the client's key order); nullptr otherwise.
ServeRequest parse_chat_request(const nlohmann::json& body, const ServeContext& context,
                                const nlohmann::ordered_json* ordered_body = nullptr);

// max_tokens for one prompt: the request's (checked to fit max_model_len) or, for chat
// without one, whatever max_model_len leaves after the prompt.
int64_t resolve_max_tokens(const ServeRequest& request, int64_t prompt_tokens,
                           const ServeContext& context);

}  // namespace aspen::serve
