// EngineService: one RolloutEngine driven by its own thread, shared by any number of
// client threads. Requests submitted concurrently join the same continuous batch, as
// in vLLM's AsyncLLMEngine: a request arriving while others decode is admitted at the
// next step.
//
// submit() takes one client request's prompts (one GenerationRequest each), gives each a
// service-unique id (any id it had is replaced) and returns their RequestStream. The
// engine validates each on its thread; a refused one puts a kFailed event with the
// engine's message (client_error) on the stream. cancel() drops a stream's unfinished
// requests (a client that went away or failed) and frees their KV blocks; the stream
// gets no further events.
//
// If a step throws (a bug or an allocation failure), every in-flight request fails
// with that message, is dropped from the engine, and the service keeps serving.
//
// abort_all(reason) is the end of a shutdown's grace period: every request in the
// service fails with `reason` at once (its KV blocks freed), and so does every request
// submitted after it.
//
// Thread safety: submit(), cancel(), abort_all() and snapshot() from any thread. The
// destructor stops the thread; requests still in flight then fail with "server
// shutting down".
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "aspen/rollout/engine.h"
#include "aspen/serve/generation_service.h"
#include "aspen/serve/imports.h"
#include "aspen/serve/request_stream.h"
#include "aspen/util/mutex.h"

namespace aspen::serve {

class EngineService : public GenerationService {
 public:
  explicit EngineService(std::unique_ptr<RolloutEngine> engine);
  ~EngineService() override;
  EngineService(const EngineService&) = delete;
  EngineService& operator=(const EngineService&) = delete;

  std::shared_ptr<RequestStream> submit(std::vector<GenerationRequest> requests) override;
  void cancel(const RequestStream& stream) override;
  void abort_all(const std::string& reason);

  // Read-only facts of the engine, fixed at construction.
  const EngineConfig& engine_config() const { return engine_->config(); }

  // The engine's queue and counters as of its last loop iteration.
  struct Snapshot {
    QueueState queue;
    EngineStats stats;
    int64_t in_flight = 0;  // admitted client requests' prompts not yet finished
  };
  Snapshot snapshot() const;

 private:
  struct Pending {
    GenerationRequest request;
    int64_t prompt_index = 0;
    std::shared_ptr<RequestStream> stream;
  };
  void run();
  void admit(std::vector<Pending> pending);
  void fail_all(const std::string& message, bool unavailable = false);

  std::unique_ptr<RolloutEngine> engine_;
  mutable Mutex mutex_;
  CondVar wake_;
  std::vector<Pending> pending_ GUARDED_BY(mutex_);
  std::vector<std::string> cancelled_ GUARDED_BY(mutex_);
  bool stopping_ GUARDED_BY(mutex_) = false;
  // Set by abort_all: every request fails.
  std::optional<std::string> abort_reason_ GUARDED_BY(mutex_);
  bool abort_requested_ GUARDED_BY(mutex_) = false;  // the engine thread has yet to act on it
  Snapshot snapshot_ GUARDED_BY(mutex_);
  int64_t next_id_ GUARDED_BY(mutex_) = 0;
  // Engine thread only: the streams of admitted, unfinished requests, and how many of
  // their samples are still to finish.
  struct InFlight {
    std::shared_ptr<RequestStream> stream;
    int64_t prompt_index = 0;
    int64_t remaining = 0;  // samples not yet finished
  };
  std::map<std::string, InFlight> in_flight_;
  std::thread thread_;
};

}  // namespace aspen::serve
