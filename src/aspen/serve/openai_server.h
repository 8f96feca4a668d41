// OpenAiServer: the HTTP front of `aspen serve` (cpp-httplib). Routes:
//   GET  /health               200, empty body, while the server runs
//   GET  /v1/models            the base model, with its max_model_len, and each LoRA
//                              adapter with its "root" (directory) and "parent" (the
//                              base's name), as vLLM lists --lora-modules
//   POST /v1/completions       openai_request.h / openai_response.h
//   POST /v1/chat/completions  with the model's chat template
// Every connection is answered by a thread of its own (ConnectionThreads), which
// submits the prompts to the shared GenerationService (an EngineService, or a rollout
// instance's agent endpoint: generation_service.h) and waits for (or streams, as
// server-sent events ending in "data: [DONE]") the samples; concurrent requests
// therefore share the continuous batch. The request's "model" picks the engine: the
// base model's, or the engine of the LoRA adapter of that name (each adapter has its
// own engine and KV cache over weights it shares with the base: docs/serve.md).
// With ServerOptions::agent it is the endpoint of a run's agent programs (key, sessions,
// tools: agent_endpoint.h). A bad request gets a 400 (unknown model: 404)
// with an OpenAI-style JSON error naming the field, and the server keeps serving.
//
// A client that disconnects, streaming or not, has its request cancelled within
// kClientCheckInterval and its engine slots and KV blocks freed (ClientConnection).
// Generation requests hold at most max_connections - kConnectionsForProbes threads;
// one beyond that gets a 503 at once, so /health and /v1/models always find a thread.
//
// Thread safety: run() blocks the calling thread; stop(), stop_accepting() and
// end_connections() may be called from any thread (or a signal-watching one). A
// graceful stop is stop_accepting(), time for the requests in progress (which
// EngineService::abort_all can end early), then end_connections(); run() returns once
// every connection has ended. stop() is all of that at once, cutting streams short.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "aspen/serve/agent_endpoint.h"
#include "aspen/serve/engine_service.h"
#include "aspen/serve/generation_service.h"
#include "aspen/serve/imports.h"
#include "aspen/serve/openai_request.h"

namespace httplib {
class Server;
}

namespace aspen::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;              // 0: any free port (bound_port() tells which)
  int max_connections = 1024;   // served at once, a thread each; more wait to be served
  int64_t max_body_bytes = 32LL << 20;
  // The endpoint of a run's agent programs (agent_endpoint.h): API key, sessions, tools.
  // nullptr for `aspen serve`. Outlives the server.
  AgentEndpoint* agent = nullptr;
};

// Threads that generation requests leave to /health and /v1/models.
constexpr int kConnectionsForProbes = 16;
// How often a thread waiting for samples checks that its client is still connected.
constexpr std::chrono::milliseconds kClientCheckInterval{100};

class OpenAiServer {
 public:
  OpenAiServer(ServeContext context, GenerationService& service, ServerOptions options);
  // Serving LoRA adapters too: `adapters` holds the engine of each adapter
  // context.adapters names (aspen::Error naming the adapter for one without an engine
  // or an engine without an adapter). The services outlive the server.
  OpenAiServer(ServeContext context, GenerationService& service,
               std::map<std::string, EngineService*> adapters, ServerOptions options);
  ~OpenAiServer();

  // Binds the socket; throws aspen::Error naming host:port when it cannot.
  void bind();
  int bound_port() const { return port_; }
  // Serves until stop(), or until stop_accepting() and the connections then open end.
  void run();
  void stop();
  // A graceful stop: no new connections; the open ones, streams and idle keep-alive
  // ones included, go on until they end or end_connections() (which must follow
  // stop_accepting()) cuts them.
  void stop_accepting();
  void end_connections();

 private:
  void register_routes();
  // The engine of a served name (one that parse_*_request accepted).
  GenerationService& service_for(const std::string& model);

  ServeContext context_;
  GenerationService& service_;
  std::map<std::string, EngineService*> adapter_services_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::atomic<int> generating_{0};  // generation requests being answered
};

}  // namespace aspen::serve
