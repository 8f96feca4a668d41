#include "aspen/serve/engine_service.h"

#include <algorithm>
#include <exception>

#include "aspen/serve/imports.h"
#include "aspen/util/error.h"
#include "aspen/util/log.h"

namespace aspen::serve {

EngineService::EngineService(std::unique_ptr<RolloutEngine> engine) : engine_(std::move(engine)) {
  engine_->set_token_listener(
      [this](const std::string& request_id, int64_t sample_index, TokenId token, float logprob) {
        auto it = in_flight_.find(request_id);
        if (it == in_flight_.end()) return;
        StreamEvent event;
        event.kind = StreamEvent::Kind::kToken;
        event.prompt_index = it->second.prompt_index;
        event.sample_index = sample_index;
        event.token = token;
        event.logprob = logprob;
        it->second.stream->push(std::move(event));
      });
  thread_ = std::thread([this] { run(); });
}

EngineService::~EngineService() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
  for (auto& pending : pending_) {
    StreamEvent event;
    event.kind = StreamEvent::Kind::kFailed;
    event.error = "server shutting down";
    event.unavailable = true;
    pending.stream->push(std::move(event));
  }
  fail_all("server shutting down", /*unavailable=*/true);
}

std::shared_ptr<RequestStream> EngineService::submit(std::vector<GenerationRequest> requests) {
  std::shared_ptr<RequestStream> stream;
  {
    MutexLock lock(mutex_);
    std::vector<std::string> ids;
    for (auto& request : requests) {
      request.id = "req-" + std::to_string(next_id_++);
      ids.push_back(request.id);
    }
    stream = std::make_shared<RequestStream>(ids);
    if (abort_reason_) {
      StreamEvent event;
      event.kind = StreamEvent::Kind::kFailed;
      event.error = *abort_reason_;
      event.unavailable = true;
      stream->push(std::move(event));
      return stream;
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      pending_.push_back({std::move(requests[i]), static_cast<int64_t>(i), stream});
    }
  }
  wake_.notify_one();
  return stream;
}

void EngineService::cancel(const RequestStream& stream) {
  {
    MutexLock lock(mutex_);
    cancelled_.insert(cancelled_.end(), stream.request_ids().begin(), stream.request_ids().end());
  }
  wake_.notify_one();
}

void EngineService::abort_all(const std::string& reason) {
  {
    MutexLock lock(mutex_);
    abort_reason_ = reason;
    abort_requested_ = true;
  }
  wake_.notify_one();
}

EngineService::Snapshot EngineService::snapshot() const {
  MutexLock lock(mutex_);
  return snapshot_;
}

void EngineService::admit(std::vector<Pending> pending) {
  for (auto& item : pending) {
    const std::string id = item.request.id;
    const int64_t samples = item.request.n;
    try {
      engine_->add_request(std::move(item.request));
      in_flight_[id] = {item.stream, item.prompt_index, samples};
    } catch (const Error& error) {
      StreamEvent event;
      event.kind = StreamEvent::Kind::kFailed;
      event.prompt_index = item.prompt_index;
      event.error = error.problem() + (error.hint().empty() ? "" : " (" + error.hint() + ")");
      event.client_error = true;
      item.stream->push(std::move(event));
    }
  }
}

void EngineService::fail_all(const std::string& message, bool unavailable) {
  for (auto& [id, flight] : in_flight_) {
    engine_->abort_request(id);
    StreamEvent event;
    event.kind = StreamEvent::Kind::kFailed;
    event.error = message;
    event.unavailable = unavailable;
    flight.stream->push(std::move(event));
  }
  in_flight_.clear();
}

void EngineService::run() {
  for (;;) {
    std::vector<Pending> pending;
    std::vector<std::string> cancelled;
    std::optional<std::string> abort_reason;
    {
      MutexLock lock(mutex_);
      snapshot_ = {engine_->queue_state(), engine_->stats(), static_cast<int64_t>(in_flight_.size())};
      while (!(stopping_ || abort_requested_ || !pending_.empty() || !cancelled_.empty() ||
               engine_->has_unfinished())) {
        wake_.wait(mutex_);
      }
      if (stopping_) return;
      pending.swap(pending_);
      cancelled.swap(cancelled_);
      if (abort_requested_) abort_reason = abort_reason_;
      abort_requested_ = false;
    }
    if (abort_reason) {
      for (auto& item : pending) {
        StreamEvent event;
        event.kind = StreamEvent::Kind::kFailed;
        event.prompt_index = item.prompt_index;
        event.error = *abort_reason;
        event.unavailable = true;
        item.stream->push(std::move(event));
      }
      fail_all(*abort_reason, /*unavailable=*/true);
      continue;
    }
    for (const auto& id : cancelled) {
      if (in_flight_.erase(id) > 0) engine_->abort_request(id);
      // Not yet admitted: it is in `pending` (submitted and cancelled in one wake-up).
      pending.erase(std::remove_if(pending.begin(), pending.end(),
                                   [&](const Pending& p) { return p.request.id == id; }),
                    pending.end());
    }
    admit(std::move(pending));
    if (!engine_->has_unfinished()) continue;
    std::vector<Completion> finished;
    try {
      finished = engine_->step();
    } catch (const std::exception& error) {
      log_error(std::string("engine step failed: ") + error.what());
      fail_all(std::string("engine step failed: ") + error.what());
      continue;
    }
    for (auto& completion : finished) {
      auto it = in_flight_.find(completion.request_id);
      if (it == in_flight_.end()) continue;
      StreamEvent event;
      event.kind = StreamEvent::Kind::kFinished;
      event.prompt_index = it->second.prompt_index;
      event.sample_index = completion.sample_index;
      event.completion = std::move(completion);
      it->second.stream->push(std::move(event));
      if (--it->second.remaining == 0) in_flight_.erase(it);
    }
  }
}

}  // namespace aspen::serve
