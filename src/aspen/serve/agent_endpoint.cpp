#include "aspen/serve/agent_endpoint.h"

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

AgentEndpoint::AgentEndpoint(AgentSessions& sessions, std::string api_key)
    : sessions_(sessions), api_key_(std::move(api_key)) {
  check_input(!api_key_.empty(), "the agent endpoint needs a non-empty API key", "OPENAI_API_KEY");
}

void AgentEndpoint::authenticate(const std::string& authorization) const {
  const std::string prefix = "Bearer ";
  if (authorization.compare(0, prefix.size(), prefix) != 0 ||
      !same_secret(authorization.substr(prefix.size()), api_key_)) {
    throw RequestError(401,
                       "invalid API key: send this run's OPENAI_API_KEY as "
                       "`Authorization: Bearer <key>`",
                       "Authorization");
  }
}

std::string AgentEndpoint::begin(const std::string& session_header, ServeRequest& request) {
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
  try {
    request.prompts[0] = sessions_.begin_call(session, request.prompt_text);
  } catch (const SessionRefused& refused) {
    throw RequestError(refused.status(), refused.problem(), "user");
  }
  return session;
}

void AgentEndpoint::finish(const std::string& session, const Completion& completion) {
  sessions_.finish_call(session, completion.token_ids, completion.logprobs,
                        completion.policy_versions);
}

void AgentEndpoint::cancel(const std::string& session) { sessions_.cancel_call(session); }

}  // namespace aspen::serve
