#include "aspen/serve/connection_threads.h"
#include "aspen/serve/imports.h"

namespace aspen::serve {

ConnectionThreads::ConnectionThreads(size_t max_threads)
    : max_threads_(max_threads < 1 ? 1 : max_threads) {}

ConnectionThreads::~ConnectionThreads() { shutdown(); }

void ConnectionThreads::enqueue(std::function<void()> task) {
  MutexLock lock(mutex_);
  join_ended();
  if (running_ >= max_threads_) {
    waiting_.push_back(std::move(task));
    return;
  }
  ++running_;
  std::thread thread([this, task = std::move(task)]() mutable { work(std::move(task)); });
  const std::thread::id id = thread.get_id();
  threads_.emplace(id, std::move(thread));
}

void ConnectionThreads::work(std::function<void()> task) {
  for (;;) {
    task();
    MutexLock lock(mutex_);
    if (waiting_.empty()) {
      // The thread's last touch of this object is under the mutex, so that shutdown()
      // (which takes it) never joins or destroys a thread still using it.
      ended_.push_back(std::this_thread::get_id());
      --running_;
      all_ended_.notify_all();
      return;
    }
    task = std::move(waiting_.front());
    waiting_.pop_front();
  }
}

void ConnectionThreads::join_ended() {
  // Every id on ended_ is in threads_: enqueue() stores a thread before releasing the
  // mutex that its work() needs to end.
  std::vector<std::thread> ended;
  for (const auto& id : ended_) {
    auto it = threads_.find(id);
    ended.push_back(std::move(it->second));
    threads_.erase(it);
  }
  ended_.clear();
  mutex_.unlock();
  for (auto& thread : ended) thread.join();  // each has returned from work() or is about to
  mutex_.lock();
}

void ConnectionThreads::shutdown() {
  std::map<std::thread::id, std::thread> threads;
  {
    MutexLock lock(mutex_);
    while (running_ != 0 || !waiting_.empty()) all_ended_.wait(mutex_);
    threads.swap(threads_);
    ended_.clear();
  }
  for (auto& [id, thread] : threads) thread.join();
}

}  // namespace aspen::serve
