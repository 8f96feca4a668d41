#include "aspen/serve/agent_endpoint.h"

#include <algorithm>

#include "aspen/serve/imports.h"

namespace aspen::serve {
namespace {

// Compares in time independent of where the strings differ: the key is a secret (its
// length is not worth hiding).
bool same_secret(const std::string& given, const std::string& key) {
  if (given.size() != key.size()) return false;
  unsigned char differ = 0;
  for (size_t i = 0; i < key.size(); ++i) {
    differ |= static_cast<unsigned char>(given[i] ^ key[i]);
  }
  return differ == 0;
}

}  // namespace

AgentEndpoint::AgentEndpoint(AgentSessions& sessions, AgentEndpointOptions options)
    : sessions_(sessions), options_(std::move(options)) {
  check_input(!options_.api_key.empty(), "the agent endpoint needs a non-empty API key",
              "OPENAI_API_KEY");
  if (options_.sampling) options_.sampling->validate("agent endpoint sampling");
}

void AgentEndpoint::authenticate(const std::string& authorization) const {
  const std::string prefix = "Bearer ";
  if (authorization.compare(0, prefix.size(), prefix) != 0 ||
      !same_secret(authorization.substr(prefix.size()), options_.api_key)) {
    throw RequestError(401,
                       "invalid API key: send this run's OPENAI_API_KEY as "
                       "`Authorization: Bearer <key>`",
                       "Authorization");
  }
}

std::string AgentEndpoint::begin(const std::string& session_header, ServeRequest& request,
                                 const ServeContext& context) {
  if (request.endpoint != Endpoint::kChatCompletions) {
    throw RequestError(400, "the agent endpoint serves /v1/chat/completions only", "prompt");
  }
  if (!session_header.empty() && !request.user.empty() && session_header != request.user) {
    throw RequestError(400,
                       std::string("the ") + kSessionHeader + " header and `user` name different "
                                                              "sessions",
                       "user");
  }
  const std::string session = !session_header.empty() ? session_header : request.user;
  if (session.empty()) {
    throw RequestError(400,
                       std::string("no session: send ASPEN_SESSION as `user` or in the ") +
                           kSessionHeader + " header",
                       "user");
  }
  if (request.n != 1) throw RequestError(400, "n must be 1 (one trajectory per session)", "n");
  if (options_.sampling) {
    request.params.temperature = options_.sampling->temperature;
    request.params.top_k = options_.sampling->top_k;
    request.params.top_p = options_.sampling->top_p;
    request.params.min_p = options_.sampling->min_p;
  }
  try {
    request.prompts[0] = sessions_.begin_call(session, request.prompt_text);
  } catch (const SessionRefused& refused) {
    throw RequestError(refused.status(), refused.problem(), "user");
  }
  // The ledger's tokens may be more than the rendered text's (a non-canonical turn):
  // check the room again, and leave the session's token limit room for nothing more.
  try {
    const int64_t prompt = static_cast<int64_t>(request.prompts[0].size());
    int64_t max_tokens = resolve_max_tokens(request, prompt, context);
    const int64_t limit = sessions_.limits().max_context_tokens;
    if (limit > 0) max_tokens = std::min(max_tokens, limit - prompt);
    if (max_tokens < 1) {
      throw RequestError(400,
                         "the session's context has " + std::to_string(prompt) +
                             " tokens: no room left in this server's context of " +
                             std::to_string(context.max_model_len),
                         "messages");
    }
    request.params.max_tokens = max_tokens;
    request.max_tokens_given = true;
  } catch (const RequestError&) {
    sessions_.cancel_call(session);
    throw;
  }
  return session;
}

void AgentEndpoint::finish(const std::string& session, const Completion& completion,
                           int64_t tool_calls, int64_t tool_errors) {
  sessions_.finish_call(session, completion.token_ids, completion.logprobs,
                        completion.policy_versions, tool_calls, tool_errors);
}

void AgentEndpoint::cancel(const std::string& session) { sessions_.cancel_call(session); }

}  // namespace aspen::serve
