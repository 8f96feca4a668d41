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

}  // namespace aspen
