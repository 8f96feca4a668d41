// AgentEndpoint: what turns an OpenAiServer into the endpoint of a run's
// bring-your-own-agent programs (agent/agent_program.h). With ServerOptions::agent set:
//
//   - /v1/chat/completions and /v1/completions need `Authorization: Bearer <key>`, the
//     run's secret (the programs get it as OPENAI_API_KEY): 401 otherwise. /health and
//     /v1/models stay open to probes.
//   - /v1/completions is refused (400): a session's trajectory is a chat.
//   - each chat request names its session: the header X-Aspen-Session, or the body's
//     `user` field (the programs get the id as ASPEN_SESSION); both given must agree.
//     No session: 400. n must be 1 (one trajectory per session).
//   - the request's rendered prompt goes through the session's ledger
//     (agent/agent_sessions.h): the engine continues the ledger's tokens, and the
//     generation is recorded there when it finishes (AgentCall). Refusals carry the
//     ledger's status: 403 unknown session, 409 a late call (the program already printed
//     its reward) or one while another is in flight, 400 a refused prefix break.
//   - chat requests may carry tools (ServeContext::tool_calls is switched on), and
//     replies carry the parsed calls (chat_tool_reply.h); any `model` name is the
//     policy's (ServeContext::any_model_name).
//
// Thread safety: every method may be called from any thread (AgentSessions locks).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "aspen/agent/agent_sessions.h"
#include "aspen/rollout/engine.h"
#include "aspen/rollout/sampling_params.h"
#include "aspen/serve/imports.h"
#include "aspen/serve/openai_request.h"

namespace aspen::serve {

inline constexpr const char* kSessionHeader = "X-Aspen-Session";

struct AgentEndpointOptions {
  std::string api_key;  // non-empty: the run's secret (AgentSessions::random_secret())
  // The run's sampling (rollout.sampling): when set, it replaces each call's
  // temperature, top_k, top_p and min_p, so that an agent samples from the distribution
  // the rest of the rollout samples (and the trainer's importance ratios assume) whatever
  // its code asks for. The call keeps its own max_tokens, stop and seed.
  std::optional<SamplingParams> sampling;
};

class AgentEndpoint {
 public:
  // `sessions` outlives the endpoint.
  AgentEndpoint(AgentSessions& sessions, AgentEndpointOptions options);
  AgentEndpoint(AgentSessions& sessions, std::string api_key)
      : AgentEndpoint(sessions, AgentEndpointOptions{std::move(api_key), std::nullopt}) {}

  // Throws RequestError(401) unless `authorization` is "Bearer <the key>".
  void authenticate(const std::string& authorization) const;
  // Names the request's session and begins its call: request.prompts[0] becomes the
  // tokens the engine must continue, its sampling the run's (options), its max_tokens
  // what max_model_len and the session's token limit leave. Returns the session id.
  // Throws RequestError (with no call left open).
  std::string begin(const std::string& session_header, ServeRequest& request,
                    const ServeContext& context);
  // `tool_calls`/`tool_errors`: the calls chat_tool_reply parsed out of the reply.
  void finish(const std::string& session, const Completion& completion, int64_t tool_calls = 0,
              int64_t tool_errors = 0);
  void cancel(const std::string& session);

  AgentSessions& sessions() { return sessions_; }

 private:
  AgentSessions& sessions_;
  AgentEndpointOptions options_;
};

// One request's call in its session: finish() records the generation; a call that goes
// without (failed, cancelled, its client gone, an exception) is cancelled, so the
// session's next call starts from the context as it was.
class AgentCall {
 public:
  AgentCall(AgentEndpoint& endpoint, std::string session)
      : endpoint_(endpoint), session_(std::move(session)) {}
  ~AgentCall() {
    if (!done_) endpoint_.cancel(session_);
  }
  AgentCall(const AgentCall&) = delete;
  AgentCall& operator=(const AgentCall&) = delete;
  const std::string& session() const { return session_; }
  void finish(const Completion& completion, int64_t tool_calls = 0, int64_t tool_errors = 0) {
    if (done_) return;
    done_ = true;
    endpoint_.finish(session_, completion, tool_calls, tool_errors);
  }

 private:
  AgentEndpoint& endpoint_;
  std::string session_;
  bool done_ = false;
};

}  // namespace aspen::serve
