// ConnectionThreads: the task queue of `aspen serve`'s HTTP server (cpp-httplib hands it
// one task per accepted connection), running each connection on a thread of its own,
// up to `max_threads` at once; a connection beyond that waits for a thread to end.
//
// Why not httplib's fixed ThreadPool: a non-streaming request holds its thread until
// all its samples are generated, so with a pool of N threads, N long requests made
// every later connection wait, /health included. Here a thread is started when a
// connection arrives and ends when it closes, so a slow request delays only its own
// connection. The server keeps generation from taking the last threads (see
// OpenAiServer), so /health and /v1/models always find one.
//
// Thread safety: enqueue() from httplib's accept thread, shutdown() once, after the
// last enqueue(); shutdown() returns when every task has run.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "aspen/serve/imports.h"
#include "aspen/util/mutex.h"

namespace aspen::serve {

class ConnectionThreads : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads);
  ~ConnectionThreads() override;

  void enqueue(std::function<void()> task) override EXCLUDES(mutex_);
  void shutdown() override EXCLUDES(mutex_);

 private:
  // Runs `task`, then tasks from the queue until it is empty.
  void work(std::function<void()> task) EXCLUDES(mutex_);
  // Joins the threads that have ended (each ends by putting itself on ended_). Drops
  // mutex_ while it joins and holds it again on return.
  void join_ended() REQUIRES(mutex_);

  const size_t max_threads_;
  Mutex mutex_;
  CondVar all_ended_;
  std::deque<std::function<void()>> waiting_ GUARDED_BY(mutex_);
  std::map<std::thread::id, std::thread> threads_ GUARDED_BY(mutex_);
  std::vector<std::thread::id> ended_ GUARDED_BY(mutex_);
  size_t running_ GUARDED_BY(mutex_) = 0;  // threads not yet on ended_
};

}  // namespace aspen::serve
