#include "aspen/serve/openai_request.h"
#include "aspen/serve/imports.h"
#include "aspen/serve/chat_tools.h"

#include <algorithm>
#include <set>

namespace aspen::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& field, const std::string& problem) {
  throw RequestError(400, problem, field);
}

void check_fields(const json& body, const std::set<std::string>& known) {
  if (!body.is_object()) bad("body", "the request body must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (!known.count(key)) bad(key, "unknown field \"" + key + "\"");
  }
}

// A present, non-null field.
bool given(const json& body, const char* field) {
  return body.contains(field) && !body[field].is_null();
}

int64_t integer(const json& body, const char* field) {
  const json& value = body[field];
  if (!value.is_number_integer()) bad(field, std::string(field) + " must be an integer");
  return value.get<int64_t>();
}

double number(const json& body, const char* field) {
  const json& value = body[field];
  if (!value.is_number()) bad(field, std::string(field) + " must be a number");
  return value.get<double>();
}

bool boolean(const json& body, const char* field) {
  const json& value = body[field];
  if (!value.is_boolean()) bad(field, std::string(field) + " must be true or false");
  return value.get<bool>();
}

// The served name the request chose: the base model's when it names none (vLLM does
// the same); an adapter's when it names one (the adapter's engine answers it).
std::string chosen_model(const json& body, const ServeContext& context) {
  if (!given(body, "model")) return context.model_name;
  if (!body["model"].is_string()) bad("model", "model must be a string");
  const std::string model = body["model"].get<std::string>();
  if (model == context.model_name || context.any_model_name) return context.model_name;
  std::string served = "`" + context.model_name + "`";
  for (const ServedAdapter& adapter : context.adapters) {
    if (model == adapter.name) return model;
    served += ", `" + adapter.name + "`";
  }
  throw RequestError(404, "The model `" + model + "` does not exist (this server serves " +
                              served + ")",
                     "model");
}

// The fields both endpoints share.
const std::set<std::string> kCommonFields = {
    "model",     "n",         "temperature", "top_p",          "stop",           "seed",
    "stream",    "stream_options", "user",   "top_k",          "min_p",          "min_tokens",
    "ignore_eos", "stop_token_ids", "presence_penalty", "frequency_penalty", "logit_bias",
    "max_tokens", "logprobs"};

void parse_common(const json& body, const ServeContext& context, ServeRequest& request) {
  request.model = chosen_model(body, context);
  SamplingParams& params = request.params;
  params = context.defaults;
  params.max_tokens = 16;
  if (given(body, "n")) request.n = integer(body, "n");
  if (request.n < 1) bad("n", "n must be >= 1");
  if (given(body, "temperature")) params.temperature = number(body, "temperature");
  if (given(body, "top_p")) params.top_p = number(body, "top_p");
  if (given(body, "top_k")) params.top_k = integer(body, "top_k");
  if (given(body, "min_p")) params.min_p = number(body, "min_p");
  if (given(body, "min_tokens")) params.min_tokens = integer(body, "min_tokens");
  if (given(body, "ignore_eos")) params.ignore_eos = boolean(body, "ignore_eos");
  if (given(body, "seed")) params.seed = static_cast<uint64_t>(integer(body, "seed"));
  if (given(body, "max_tokens")) {
    params.max_tokens = integer(body, "max_tokens");
    request.max_tokens_given = true;
    if (params.max_tokens < 1) bad("max_tokens", "max_tokens must be >= 1");
  }
  if (given(body, "stop")) {
    const json& stop = body["stop"];
    if (stop.is_string()) {
      params.stop = {stop.get<std::string>()};
    } else if (stop.is_array()) {
      for (const auto& item : stop) {
        if (!item.is_string()) bad("stop", "stop must be a string or a list of strings");
        params.stop.push_back(item.get<std::string>());
      }
    } else {
      bad("stop", "stop must be a string or a list of strings");
    }
    for (const auto& s : params.stop) {
      if (s.empty()) bad("stop", "stop strings must not be empty");
    }
  }
  if (given(body, "stop_token_ids")) {
    const json& ids = body["stop_token_ids"];
    if (!ids.is_array()) bad("stop_token_ids", "stop_token_ids must be a list of token ids");
    for (const auto& id : ids) {
      if (!id.is_number_integer()) bad("stop_token_ids", "stop_token_ids must be integers");
      params.stop_token_ids.push_back(id.get<TokenId>());
    }
  }
  if (given(body, "stream")) request.stream = boolean(body, "stream");
  if (given(body, "stream_options")) {
    const json& options = body["stream_options"];
    if (!options.is_object()) bad("stream_options", "stream_options must be an object");
    for (const auto& [key, value] : options.items()) {
      if (key != "include_usage") bad("stream_options." + key, "unknown field \"" + key + "\"");
      if (!value.is_boolean()) bad("stream_options.include_usage", "include_usage must be a boolean");
      request.include_usage = value.get<bool>();
    }
  }
  for (const char* penalty : {"presence_penalty", "frequency_penalty"}) {
    if (given(body, penalty) && number(body, penalty) != 0.0) {
      bad(penalty, std::string(penalty) + " is not supported (only 0)");
    }
  }
  if (given(body, "logit_bias") && !(body["logit_bias"].is_object() && body["logit_bias"].empty())) {
    bad("logit_bias", "logit_bias is not supported");
  }
  if (given(body, "user")) {
    if (!body["user"].is_string()) bad("user", "user must be a string");
    request.user = body["user"].get<std::string>();
  }
  try {
    params.validate("request");
  } catch (const Error& error) {
    bad("sampling", error.problem());
  }
}

std::vector<TokenId> checked_ids(const json& ids, const ServeContext& context) {
  std::vector<TokenId> prompt;
  for (const auto& id : ids) {
    if (!id.is_number_integer()) bad("prompt", "a token prompt must hold integers only");
    const int64_t value = id.get<int64_t>();
    if (value < 0 || value >= context.tokenizer->vocab_size()) {
      bad("prompt", "prompt token id " + std::to_string(value) + " is outside the vocabulary");
    }
    prompt.push_back(static_cast<TokenId>(value));
  }
  return prompt;
}

void check_prompt_fits(const std::vector<TokenId>& prompt, const ServeContext& context,
                       const char* field) {
  if (prompt.empty()) bad(field, "the prompt has no tokens");
  if (static_cast<int64_t>(prompt.size()) >= context.max_model_len) {
    bad(field, "the prompt has " + std::to_string(prompt.size()) +
                   " tokens; this server's context is " + std::to_string(context.max_model_len));
  }
}

void check_sample_count(const ServeRequest& request) {
  if (request.n * static_cast<int64_t>(request.prompts.size()) > kMaxSamplesPerRequest) {
    bad("n", "n x prompts exceeds " + std::to_string(kMaxSamplesPerRequest) + " samples");
  }
}

// The work bound (ServeContext::max_request_tokens): every sample's max_tokens, summed.
void check_request_work(const ServeRequest& request, const ServeContext& context) {
  if (context.max_request_tokens <= 0) return;
  int64_t tokens = 0;  // at most 1,024 samples x max_model_len: no overflow
  for (const auto& prompt : request.prompts) {
    tokens += request.n * resolve_max_tokens(request, static_cast<int64_t>(prompt.size()), context);
  }
  if (tokens > context.max_request_tokens) {
    const char* field = request.n > 1 ? "n" : "prompt";  // n = 1: the prompts are many
    bad(field, "n x prompts x max_tokens asks for up to " + std::to_string(tokens) +
                   " generated tokens; one request may ask for at most " +
                   std::to_string(context.max_request_tokens) +
                   " (--max-num-seqs x max_model_len: one full batch); lower n or max_tokens");
  }
}

std::string message_text(const json& content, const std::string& field) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array()) {
    std::string text;
    for (const auto& part : content) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
          !part["text"].is_string()) {
        bad(field, "content parts must be {\"type\": \"text\", \"text\": \"...\"}");
      }
      text += part["text"].get<std::string>();
    }
    return text;
  }
  bad(field, "content must be a string or a list of text parts");
}

}  // namespace

ServeRequest parse_completion_request(const json& body, const ServeContext& context) {
  std::set<std::string> known = kCommonFields;
  known.insert({"prompt", "echo", "suffix", "best_of"});
  check_fields(body, known);
  ServeRequest request;
  request.endpoint = Endpoint::kCompletions;
  parse_common(body, context, request);
  if (given(body, "logprobs")) {
    if (integer(body, "logprobs") != 0) {
      bad("logprobs", "top-N alternatives are not computed; use logprobs=0 for the sampled "
                      "tokens' log-probs");
    }
    request.logprobs = true;
  }
  if (given(body, "echo") && boolean(body, "echo")) bad("echo", "echo is not supported");
  if (given(body, "suffix")) bad("suffix", "suffix is not supported");
  if (given(body, "best_of") && integer(body, "best_of") != request.n) {
    bad("best_of", "best_of is not supported (only equal to n)");
  }
  if (!given(body, "prompt")) bad("prompt", "prompt is required");
  const json& prompt = body["prompt"];
  if (prompt.is_string()) {
    request.prompts.push_back(context.tokenizer->encode(prompt.get<std::string>()));
  } else if (prompt.is_array() && !prompt.empty() && prompt[0].is_number_integer()) {
    request.prompts.push_back(checked_ids(prompt, context));
  } else if (prompt.is_array() && !prompt.empty()) {
    for (const auto& item : prompt) {
      if (item.is_string()) {
        request.prompts.push_back(context.tokenizer->encode(item.get<std::string>()));
      } else if (item.is_array()) {
        request.prompts.push_back(checked_ids(item, context));
      } else {
        bad("prompt", "prompt must be a string, a list of strings, or token ids");
      }
    }
  } else {
    bad("prompt", "prompt must be a non-empty string, list of strings, or token ids");
  }
  for (const auto& ids : request.prompts) check_prompt_fits(ids, context, "prompt");
  check_sample_count(request);
  for (const auto& ids : request.prompts) resolve_max_tokens(request, ids.size(), context);
  check_request_work(request, context);
  return request;
}

ServeRequest parse_chat_request(const json& body, const ServeContext& context,
                                const nlohmann::ordered_json* ordered_body) {
  std::set<std::string> known = kCommonFields;
  known.insert({"messages", "max_completion_tokens", "top_logprobs", "chat_template_kwargs",
                "tools", "tool_choice"});
  check_fields(body, known);
  if (!context.chat_template) {
    throw RequestError(400, "this model has no chat template; use /v1/completions", "messages");
  }
  ServeRequest request;
  request.endpoint = Endpoint::kChatCompletions;
  parse_common(body, context, request);
  if (given(body, "max_completion_tokens")) {
    request.params.max_tokens = integer(body, "max_completion_tokens");
    request.max_tokens_given = true;
    if (request.params.max_tokens < 1) {
      bad("max_completion_tokens", "max_completion_tokens must be >= 1");
    }
  }
  if (given(body, "logprobs")) request.logprobs = boolean(body, "logprobs");
  if (given(body, "top_logprobs") && integer(body, "top_logprobs") != 0) {
    bad("top_logprobs", "top-N alternatives are not computed; use top_logprobs 0");
  }
  // Even an empty list: a client that sends tools expects tool calls to be parsed out
  // of the reply, which only the agent endpoint does (docs/serve.md).
  if (!context.tool_calls) {
    for (const char* field : {"tools", "tool_choice"}) {
      if (given(body, field)) bad(field, std::string(field) + " is not supported (no tool calling)");
    }
  }
  bool enable_thinking = true;
  if (given(body, "chat_template_kwargs")) {
    const json& kwargs = body["chat_template_kwargs"];
    if (!kwargs.is_object()) bad("chat_template_kwargs", "chat_template_kwargs must be an object");
    for (const auto& [key, value] : kwargs.items()) {
      if (key != "enable_thinking" || !value.is_boolean()) {
        bad("chat_template_kwargs." + key, "only enable_thinking (a boolean) is supported");
      }
      enable_thinking = value.get<bool>();
    }
  }
  if (!given(body, "messages") || !body["messages"].is_array() || body["messages"].empty()) {
    bad("messages", "messages must be a non-empty list");
  }
  std::vector<ChatMessage> messages;
  std::vector<nlohmann::ordered_json> tools;
  if (context.tool_calls) {
    if (ordered_body == nullptr) bad("body", "tool calling needs the body in its key order");
    const ChatTools chat_tools = parse_chat_tools(*ordered_body, request.stream);
    messages = chat_tools.messages;
    tools = chat_tools.tools;
    request.parse_tool_calls = chat_tools.parse_calls;
  }
  for (size_t i = 0; !context.tool_calls && i < body["messages"].size(); ++i) {
    const json& message = body["messages"][i];
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      bad(field, "each message needs a string \"role\"");
    }
    const json content = message.value("content", json());
    messages.push_back({message["role"].get<std::string>(),
                        content.is_null() ? std::string() : message_text(content, field + ".content")});
  }
  std::string text;
  try {
    text = context.chat_template->render(messages, /*add_generation_prompt=*/true, enable_thinking,
                                         tools);
  } catch (const Error& error) {
    bad("messages", error.problem());
  }
  request.prompts.push_back(context.tokenizer->encode(text));
  request.prompt_text = std::move(text);
  check_prompt_fits(request.prompts[0], context, "messages");
  check_sample_count(request);
  resolve_max_tokens(request, request.prompts[0].size(), context);
  check_request_work(request, context);
  return request;
}

int64_t resolve_max_tokens(const ServeRequest& request, int64_t prompt_tokens,
                           const ServeContext& context) {
  const int64_t room = context.max_model_len - prompt_tokens;
  if (!request.max_tokens_given) {
    // Chat: whatever the context leaves (vLLM's default); completions: OpenAI's 16.
    return request.endpoint == Endpoint::kChatCompletions
               ? room
               : std::min<int64_t>(request.params.max_tokens, room);
  }
  if (request.params.max_tokens > room) {
    bad("max_tokens", "max_tokens " + std::to_string(request.params.max_tokens) + " + the prompt's " +
                          std::to_string(prompt_tokens) + " tokens exceed this server's context of " +
                          std::to_string(context.max_model_len));
  }
  return request.params.max_tokens;
}

}  // namespace aspen::serve
