// GenerationService: what an OpenAiServer submits its requests to. Two implement it:
// EngineService (`aspen serve`: an engine with a thread of its own) and, in a training
// run, a rollout instance's agent endpoint (pipeline/agent_loop.h: the instance's own
// thread steps the engine, so that the agent programs' calls join the continuous batch
// of the run's rollout and sample the current policy).
//
// submit() takes one client request's prompts, one GenerationRequest each. The service
// gives each an id of its own (RequestStream::request_ids); the id a request carries in
// is a name the service may use: with ServerOptions::agent it is the request's agent
// session (agent_endpoint.h), otherwise empty. The stream gets each sample's kFinished
// (kToken events before it where the service streams tokens) or a kFailed.
// cancel() gives up a stream's unfinished requests; the stream gets no further events.
// Thread safety: submit() and cancel() may be called from any thread.
#pragma once

#include <memory>
#include <vector>

#include "aspen/rollout/engine.h"
#include "aspen/serve/imports.h"
#include "aspen/serve/request_stream.h"

namespace aspen::serve {

class GenerationService {
 public:
  virtual ~GenerationService() = default;
  virtual std::shared_ptr<RequestStream> submit(std::vector<GenerationRequest> requests) = 0;
  virtual void cancel(const RequestStream& stream) = 0;
};

}  // namespace aspen::serve
