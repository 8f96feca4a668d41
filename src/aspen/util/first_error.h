// FirstError: the first exception any of several worker threads caught, kept for the
// thread that joins them to rethrow. Later ones are dropped: one failure fails the
// whole call, and the first is the one to report.
// Thread safety: record() from any thread; rethrow_if_any() once the workers are joined
// (it may be called earlier, and then reports what was recorded so far).
#pragma once

#include <exception>

#include "aspen/util/mutex.h"

namespace aspen {

class FirstError {
 public:
  // Keeps `error` unless one was recorded before.
  void record(std::exception_ptr error) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    if (!first_) first_ = std::move(error);
  }

  // Rethrows the first recorded exception; returns when there is none.
  void rethrow_if_any() const EXCLUDES(mutex_) {
    std::exception_ptr error;
    {
      MutexLock lock(mutex_);
      error = first_;
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  mutable Mutex mutex_;
  std::exception_ptr first_ GUARDED_BY(mutex_);
};

}  // namespace aspen
