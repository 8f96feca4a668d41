// RequestStream: the events of one client request (one or more prompts, each with n
// samples), handed from the engine's thread to the thread that answers the client.
//
// Per sample, kToken events in generation order, then one kFinished carrying the
// sample's Completion; or a kFailed (a prompt was refused or the engine failed), after
// which the client should cancel the rest. The request is over after one kFinished per
// sample of every prompt, or a kFailed.
//
// Thread safety: push() and next() may be called from different threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "aspen/rollout/engine.h"
#include "aspen/serve/imports.h"
#include "aspen/util/mutex.h"

namespace aspen::serve {

struct StreamEvent {
  enum class Kind { kToken, kFinished, kFailed };
  Kind kind = Kind::kToken;
  int64_t prompt_index = 0;  // which of the client request's prompts
  int64_t sample_index = 0;
  TokenId token = 0;
  float logprob = 0.0f;   // kToken: temperature-1 policy log-prob
  Completion completion;  // kFinished
  std::string error;      // kFailed: one line, for the client
  bool client_error = false;  // kFailed: the request was invalid (HTTP 400), not the server
  bool unavailable = false;   // kFailed: the server is shutting down (HTTP 503)
};

class RequestStream {
 public:
  explicit RequestStream(std::vector<std::string> request_ids)
      : request_ids_(std::move(request_ids)) {}

  // The engine request ids of the prompts, by prompt index.
  const std::vector<std::string>& request_ids() const { return request_ids_; }

  void push(StreamEvent event) EXCLUDES(mutex_);
  // Blocks until the next event.
  StreamEvent next() EXCLUDES(mutex_);
  // The next event, or nullopt if none came within `timeout` (a waiting client's
  // thread wakes to check that its client is still there).
  std::optional<StreamEvent> next_for(std::chrono::milliseconds timeout) EXCLUDES(mutex_);

 private:
  const std::vector<std::string> request_ids_;
  Mutex mutex_;
  CondVar ready_;
  std::deque<StreamEvent> events_ GUARDED_BY(mutex_);
};

}  // namespace aspen::serve
