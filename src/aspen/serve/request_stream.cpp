#include "aspen/serve/request_stream.h"

#include "aspen/serve/imports.h"

namespace aspen::serve {

void RequestStream::push(StreamEvent event) {
  {
    MutexLock lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_one();
}

StreamEvent RequestStream::next() {
  MutexLock lock(mutex_);
  while (events_.empty()) ready_.wait(mutex_);
  StreamEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

std::optional<StreamEvent> RequestStream::next_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mutex_);
  while (events_.empty()) {
    if (!ready_.wait_until(mutex_, deadline) && events_.empty()) return std::nullopt;
  }
  StreamEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

}  // namespace aspen::serve
