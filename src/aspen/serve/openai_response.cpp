#include "aspen/serve/openai_response.h"
#include "aspen/serve/imports.h"

namespace aspen::serve {
namespace {

using nlohmann::json;

bool is_chat(const ResponseHeader& header) { return header.endpoint == Endpoint::kChatCompletions; }

json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

json logprobs_json(const ResponseHeader& header, const std::vector<TokenLogprob>& tokens,
                   int64_t text_offset) {
  if (is_chat(header)) {
    json content = json::array();
    for (const auto& token : tokens) {
      json bytes = json::array();
      for (unsigned char c : token.token) bytes.push_back(static_cast<int>(c));
      content.push_back({{"token", token.token},
                         {"logprob", token.logprob},
                         {"bytes", bytes},
                         {"top_logprobs", json::array()}});
    }
    return {{"content", content}};
  }
  json texts = json::array(), logprobs = json::array(), offsets = json::array();
  for (const auto& token : tokens) {
    texts.push_back(token.token);
    logprobs.push_back(token.logprob);
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(token.token.size());
  }
  return {{"tokens", texts}, {"token_logprobs", logprobs}, {"top_logprobs", nullptr},
          {"text_offset", offsets}};
}

json header_json(const ResponseHeader& header, bool chunk) {
  const char* object = is_chat(header) ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                       : "text_completion";
  return {{"id", header.id}, {"object", object}, {"created", header.created}, {"model", header.model}};
}

}  // namespace

json response_body(const ResponseHeader& header, const std::vector<ChoiceResult>& choices,
                   bool logprobs, const Usage& usage) {
  json body = header_json(header, /*chunk=*/false);
  json list = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& choice = choices[i];
    json item = {{"index", i},
                 {"logprobs", logprobs ? logprobs_json(header, choice.tokens, 0) : json(nullptr)},
                 {"finish_reason", choice.finish_reason}};
    if (is_chat(header)) {
      item["message"] = {{"role", "assistant"}, {"content", choice.text}};
      if (!choice.tool_calls.is_null()) {
        // A reply with tool calls (agent endpoint): OpenAI's content is null when empty.
        if (choice.text.empty()) item["message"]["content"] = nullptr;
        item["message"]["tool_calls"] = choice.tool_calls;
      }
    } else {
      item["text"] = choice.text;
    }
    list.push_back(std::move(item));
  }
  body["choices"] = std::move(list);
  body["usage"] = usage_json(usage);
  return body;
}

json chunk_body(const ResponseHeader& header, int64_t index, const std::string& delta,
                const std::vector<TokenLogprob>* tokens, int64_t text_offset, bool first,
                const std::optional<std::string>& finish_reason) {
  json body = header_json(header, /*chunk=*/true);
  json item = {{"index", index},
               {"logprobs", tokens ? logprobs_json(header, *tokens, text_offset) : json(nullptr)},
               {"finish_reason", finish_reason ? json(*finish_reason) : json(nullptr)}};
  if (is_chat(header)) {
    json message = json::object();
    if (first) message["role"] = "assistant";
    if (!delta.empty() || !finish_reason) message["content"] = delta;
    item["delta"] = std::move(message);
  } else {
    item["text"] = delta;
  }
  body["choices"] = json::array({std::move(item)});
  return body;
}

json usage_chunk_body(const ResponseHeader& header, const Usage& usage) {
  json body = header_json(header, /*chunk=*/true);
  body["choices"] = json::array();
  body["usage"] = usage_json(usage);
  return body;
}

json error_body(int status, const std::string& message, const std::string& param) {
  const char* type = status == 404   ? "NotFoundError"
                     : status >= 500 ? "InternalServerError"
                                     : "BadRequestError";
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", status}}}};
}

std::string wire_text(const json& body) {
  return body.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

std::string sse_event(const json& body) { return "data: " + wire_text(body) + "\n\n"; }

}  // namespace aspen::serve
