#include "aspen/serve/request_stream.h"

namespace aspen {

void RequestStream::push(StreamEvent event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(event));
  }
  ready_.notify_one();
}

StreamEvent RequestStream::next() {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait(lock, [this] { return !events_.empty(); });
  StreamEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

std::optional<StreamEvent> RequestStream::next_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return std::nullopt;
  StreamEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

}  // namespace aspen
