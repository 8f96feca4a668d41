#include "aspen/serve/openai_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "aspen/serve/chat_tool_reply.h"
#include "aspen/serve/client_connection.h"
#include "aspen/serve/connection_threads.h"
#include "aspen/serve/imports.h"
#include "aspen/serve/openai_response.h"
#include "aspen/serve/text_streamer.h"
#include "aspen/util/bounded_json.h"
#include "aspen/util/log.h"

namespace aspen::serve {
namespace {

using nlohmann::json;

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_error(httplib::Response& response, int status, const std::string& message,
                const std::string& param) {
  response.status = status;
  response.set_content(wire_text(error_body(status, message, param)), "application/json");
}

// The HTTP status of a failed request's error.
int failure_status(const StreamEvent& event) {
  return event.client_error ? 400 : event.unavailable ? 503 : 500;
}

// httplib's server, whose listening socket queues as many connections as the system
// allows: httplib listens with a backlog of 5, and a burst of clients beyond that has
// its handshakes dropped and retried by the clients' kernels seconds later.
//
// It also stops in two phases. httplib's stop() ends the accept loop and also cuts
// every response being streamed and every idle keep-alive connection at once (its
// loops watch the listening socket's handle). stop_accepting() only shuts the listening
// socket down: accept() then fails, httplib closes the socket and waits for the
// connections in progress, streams included. end_connections() then marks the socket
// gone, which ends what is left as stop() would (the socket is already closed, so it
// is not closed again).
class DeepBacklogServer : public httplib::Server {
 public:
  bool deepen_backlog() { return ::listen(svr_sock_, SOMAXCONN) == 0; }
  void stop_accepting() {
    const socket_t sock = svr_sock_;
    if (sock != INVALID_SOCKET) ::shutdown(sock, SHUT_RDWR);
  }
  void end_connections() { svr_sock_ = INVALID_SOCKET; }
};

// Counts a generation request in OpenAiServer::generating_ for as long as it lives.
class GenerationSlot {
 public:
  explicit GenerationSlot(std::atomic<int>& generating) : generating_(generating) { ++generating_; }
  ~GenerationSlot() { --generating_; }
  GenerationSlot(const GenerationSlot&) = delete;
  GenerationSlot& operator=(const GenerationSlot&) = delete;

 private:
  std::atomic<int>& generating_;
};

// One GenerationRequest per prompt, n samples each.
std::vector<GenerationRequest> generation_requests(const ServeRequest& request,
                                                   const ServeContext& context) {
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < request.prompts.size(); ++i) {
    GenerationRequest generation;
    generation.prompt = request.prompts[i];
    generation.params = request.params;
    generation.params.max_tokens =
        resolve_max_tokens(request, static_cast<int64_t>(request.prompts[i].size()), context);
    // Distinct, reproducible streams per prompt (as `aspen generate` seeds them).
    if (request.params.seed) generation.params.seed = *request.params.seed + i;
    generation.n = request.n;
    requests.push_back(std::move(generation));
  }
  return requests;
}

Usage prompt_usage(const ServeRequest& request) {
  Usage usage;
  for (const auto& prompt : request.prompts) usage.prompt_tokens += prompt.size();
  return usage;
}

TokenLogprob token_logprob(const Tokenizer& tokenizer, TokenId token, float logprob) {
  return {tokenizer.decode({token}), logprob};
}

// Everything a streamed response carries between calls of the content provider.
struct StreamState {
  ServeRequest request;
  ResponseHeader header;
  std::shared_ptr<RequestStream> stream;
  std::shared_ptr<GenerationSlot> slot;
  std::shared_ptr<AgentCall> agent_call;  // agent endpoint only
  ClientConnection client;
  std::vector<TextStreamer> streamers;  // per choice
  std::vector<bool> started;            // per choice: its first chunk was sent
  Usage usage;
  int64_t finished = 0;
  bool done = false;
};

}  // namespace

OpenAiServer::OpenAiServer(ServeContext context, GenerationService& service, ServerOptions options)
    : OpenAiServer(std::move(context), service, {}, std::move(options)) {}

OpenAiServer::OpenAiServer(ServeContext context, GenerationService& service,
                           std::map<std::string, EngineService*> adapters, ServerOptions options)
    : context_(std::move(context)),
      service_(service),
      adapter_services_(std::move(adapters)),
      options_(std::move(options)),
      server_(std::make_unique<DeepBacklogServer>()) {
  for (const ServedAdapter& adapter : context_.adapters) {
    const auto found = adapter_services_.find(adapter.name);
    check_input(found != adapter_services_.end() && found->second != nullptr,
                "no engine for the adapter", "LoRA adapter " + adapter.name);
  }
  check_input(adapter_services_.size() == context_.adapters.size(),
              "an engine for an adapter the context does not list", "LoRA adapters");
  const size_t threads = static_cast<size_t>(std::max(options_.max_connections, 1));
  server_->new_task_queue = [threads] { return new ConnectionThreads(threads); };
  server_->set_payload_max_length(static_cast<size_t>(options_.max_body_bytes));
  if (options_.agent != nullptr) {
    context_.tool_calls = true;
    context_.any_model_name = true;
  }
  register_routes();
}

OpenAiServer::~OpenAiServer() = default;

void OpenAiServer::bind() {
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
  } else {
    port_ = server_->bind_to_port(options_.host, options_.port) ? options_.port : -1;
  }
  check_input(port_ > 0, "cannot listen", options_.host + ":" + std::to_string(options_.port),
              "is the port in use, or the host not an address of this machine?");
  check_input(static_cast<DeepBacklogServer&>(*server_).deepen_backlog(), "cannot listen",
              options_.host + ":" + std::to_string(port_), "listen() refused a deeper backlog");
}

void OpenAiServer::run() { server_->listen_after_bind(); }

void OpenAiServer::stop_accepting() {
  static_cast<DeepBacklogServer&>(*server_).stop_accepting();
}

void OpenAiServer::end_connections() {
  static_cast<DeepBacklogServer&>(*server_).end_connections();
}

void OpenAiServer::stop() { server_->stop(); }

GenerationService& OpenAiServer::service_for(const std::string& model) {
  if (model == context_.model_name) return service_;
  return *adapter_services_.at(model);
}

void OpenAiServer::register_routes() {
  server_->Get("/health", [](const httplib::Request&, httplib::Response& response) {
    response.status = 200;
  });
  server_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& response) {
    const int64_t created = unix_seconds();
    json models = json::array({{{"id", context_.model_name},
                                {"object", "model"},
                                {"created", created},
                                {"owned_by", "aspen"},
                                {"max_model_len", context_.max_model_len}}});
    for (const ServedAdapter& adapter : context_.adapters) {
      models.push_back({{"id", adapter.name},
                        {"object", "model"},
                        {"created", created},
                        {"owned_by", "aspen"},
                        {"root", adapter.path},
                        {"parent", context_.model_name},
                        {"max_model_len", context_.max_model_len}});
    }
    response.set_content(wire_text(json{{"object", "list"}, {"data", models}}),
                         "application/json");
  });

  auto handle = [this](Endpoint endpoint, const httplib::Request& http_request,
                       httplib::Response& response) {
    ServeRequest request;
    try {
      if (options_.agent != nullptr) {
        options_.agent->authenticate(http_request.get_header_value("Authorization"));
      }
      const json body = parse_json_bounded(http_request.body, "request body", 64);
      if (endpoint == Endpoint::kCompletions) {
        request = parse_completion_request(body, context_);
      } else if (context_.tool_calls) {
        // Tool schemas and arguments keep the client's key order (chat_tools.h).
        const nlohmann::ordered_json ordered =
            parse_json_bounded_as<nlohmann::ordered_json>(http_request.body, "request body", 64);
        request = parse_chat_request(body, context_, &ordered);
      } else {
        request = parse_chat_request(body, context_);
      }
    } catch (const RequestError& error) {
      return send_error(response, error.status(), error.problem(), error.input());
    } catch (const Error& error) {
      return send_error(response, 400, error.problem(), error.input());
    }
    // Generation leaves kConnectionsForProbes threads to /health and /v1/models.
    auto slot = std::make_shared<GenerationSlot>(generating_);
    const int generating_limit = std::max(options_.max_connections - kConnectionsForProbes, 1);
    if (generating_.load() > generating_limit) {
      response.set_header("Retry-After", "1");
      return send_error(response, 503,
                        "server busy: " + std::to_string(generating_limit) +
                            " generation requests are being answered; retry later",
                        "");
    }
    // The agent session's call: begun here (the engine continues the session's tokens),
    // recorded when the sample finishes, cancelled if the request ends otherwise.
    std::shared_ptr<AgentCall> agent_call;
    if (options_.agent != nullptr) {
      try {
        const std::string session =
            options_.agent->begin(http_request.get_header_value(kSessionHeader), request, context_);
        agent_call = std::make_shared<AgentCall>(*options_.agent, session);
      } catch (const RequestError& error) {
        return send_error(response, error.status(), error.problem(), error.input());
      }
    }
    ClientConnection client(http_request.remote_addr, http_request.remote_port,
                            http_request.local_port);
    ResponseHeader header;
    header.endpoint = endpoint;
    header.created = unix_seconds();
    header.model = request.model;
    GenerationService& service = service_for(request.model);
    std::vector<GenerationRequest> generations = generation_requests(request, context_);
    // The agent endpoint's service learns each call's session from its request's id
    // (generation_service.h).
    if (agent_call) generations.front().id = agent_call->session();
    auto stream = service.submit(std::move(generations));
    header.id = (endpoint == Endpoint::kCompletions ? "cmpl-" : "chatcmpl-") +
                stream->request_ids().front();
    const int64_t num_choices = request.n * static_cast<int64_t>(request.prompts.size());

    if (!request.stream) {
      std::vector<ChoiceResult> choices(num_choices);
      Usage usage = prompt_usage(request);
      auto next_check = std::chrono::steady_clock::now() + kClientCheckInterval;
      for (int64_t finished = 0; finished < num_choices;) {
        // Checked on a clock, not only when no event comes: a running request's
        // samples send a token event every engine step.
        std::optional<StreamEvent> next = stream->next_for(kClientCheckInterval);
        if (std::chrono::steady_clock::now() >= next_check) {
          next_check = std::chrono::steady_clock::now() + kClientCheckInterval;
          if (client.closed()) {
            // Nobody is left to answer: free the engine for those who are (as vLLM does).
            service.cancel(*stream);
            return send_error(response, 499, "the client closed the connection", "");
          }
        }
        if (!next) continue;
        StreamEvent event = std::move(*next);
        if (event.kind == StreamEvent::Kind::kFailed) {
          service.cancel(*stream);
          return send_error(response, failure_status(event), event.error, "");
        }
        if (event.kind != StreamEvent::Kind::kFinished) continue;
        ChoiceResult& choice = choices[event.prompt_index * request.n + event.sample_index];
        const Completion& completion = event.completion;
        choice.text = completion.text;
        choice.finish_reason = finish_reason_name(completion.finish_reason);
        ToolReply reply;
        if (request.parse_tool_calls) {
          reply = chat_tool_reply(completion.text, stream->request_ids().front());
          choice.text = reply.content;
          choice.tool_calls = reply.tool_calls;
          if (!choice.tool_calls.is_null()) choice.finish_reason = "tool_calls";
        }
        if (agent_call) agent_call->finish(completion, reply.calls, reply.malformed);
        if (request.logprobs) {
          for (size_t t = 0; t < completion.token_ids.size(); ++t) {
            choice.tokens.push_back(
                token_logprob(*context_.tokenizer, completion.token_ids[t], completion.logprobs[t]));
          }
        }
        usage.completion_tokens += completion.token_ids.size();
        ++finished;
      }
      response.set_content(wire_text(response_body(header, choices, request.logprobs, usage)),
                           "application/json");
      return;
    }

    auto state = std::make_shared<StreamState>();
    state->request = std::move(request);
    state->header = header;
    state->stream = stream;
    state->slot = slot;
    state->agent_call = agent_call;
    state->client = client;
    state->usage = prompt_usage(state->request);
    for (int64_t c = 0; c < num_choices; ++c) {
      state->streamers.emplace_back(*context_.tokenizer, state->request.params.stop);
    }
    state->started.assign(num_choices, false);
    const Tokenizer* tokenizer = context_.tokenizer.get();
    response.set_chunked_content_provider(
        "text/event-stream",
        [state, tokenizer, num_choices](size_t, httplib::DataSink& sink) {
          auto write = [&sink](const std::string& text) { return sink.write(text.data(), text.size()); };
          if (state->done) {
            sink.done();
            return true;
          }
          std::optional<StreamEvent> next = state->stream->next_for(kClientCheckInterval);
          // Nothing to send yet (the request may wait for room in the batch): a client
          // gone meanwhile ends the response (false), and the releaser cancels it.
          if (!next) return !state->client.closed();
          StreamEvent event = std::move(*next);
          if (event.kind == StreamEvent::Kind::kFailed) {
            state->done = true;
            write(sse_event(error_body(failure_status(event), event.error, "")));
            write("data: [DONE]\n\n");
            sink.done();
            return true;
          }
          const int64_t index = event.prompt_index * state->request.n + event.sample_index;
          TextStreamer& streamer = state->streamers[index];
          const int64_t offset = static_cast<int64_t>(streamer.sent().size());
          const bool first = !state->started[index];
          state->started[index] = true;
          bool ok = true;
          if (event.kind == StreamEvent::Kind::kToken) {
            const std::string delta = streamer.append(event.token);
            if (state->request.logprobs) {
              const std::vector<TokenLogprob> tokens = {
                  token_logprob(*tokenizer, event.token, event.logprob)};
              ok = write(sse_event(chunk_body(state->header, index, delta, &tokens, offset, first,
                                              std::nullopt)));
            } else if (!delta.empty() || first) {
              ok = write(sse_event(
                  chunk_body(state->header, index, delta, nullptr, offset, first, std::nullopt)));
            }
          } else {
            const Completion& completion = event.completion;
            if (state->agent_call) state->agent_call->finish(completion);
            const std::string delta = streamer.finish(completion.text);
            const std::vector<TokenLogprob> none;
            ok = write(sse_event(chunk_body(state->header, index, delta,
                                            state->request.logprobs ? &none : nullptr, offset,
                                            first, finish_reason_name(completion.finish_reason))));
            state->usage.completion_tokens += completion.token_ids.size();
            if (++state->finished == num_choices) {
              if (state->request.include_usage) {
                ok = ok && write(sse_event(usage_chunk_body(state->header, state->usage)));
              }
              ok = ok && write("data: [DONE]\n\n");
              state->done = true;
              sink.done();
            }
          }
          return ok;  // false: the client went away; httplib closes the connection
        },
        [service = &service, state](bool) {
          if (!state->done) service->cancel(*state->stream);
        });
  };
  server_->Post("/v1/completions", [handle](const httplib::Request& request,
                                            httplib::Response& response) {
    handle(Endpoint::kCompletions, request, response);
  });
  server_->Post("/v1/chat/completions", [handle](const httplib::Request& request,
                                                 httplib::Response& response) {
    handle(Endpoint::kChatCompletions, request, response);
  });
  server_->set_error_handler([](const httplib::Request& request, httplib::Response& response) {
    if (!response.body.empty()) return;
    const std::string message = response.status == 404
                                    ? "no route " + request.method + " " + request.path
                                    : "HTTP " + std::to_string(response.status);
    response.set_content(error_body(response.status, message, "").dump(), "application/json");
  });
  server_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& response, std::exception_ptr error) {
        std::string message = "internal error";
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          message = e.what();
        } catch (...) {
        }
        log_error("serve: ", message);
        send_error(response, 500, message, "");
      });
}

}  // namespace aspen::serve
