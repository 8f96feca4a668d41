// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable carrying Clang's
// thread-safety annotations (util/thread_annotations.h), so that clang proves at compile
// time that every GUARDED_BY member is touched only with its lock held (the CTest
// `thread_safety`, tools/check_thread_safety.py, runs that proof in CI). Under GCC
// they cost exactly what the std types cost: the annotations are empty and every call
// is inline.
// The API follows absl::Mutex / absl::CondVar and Chromium's base::Lock /
// base::ConditionVariable in shape, in this codebase's snake_case.
//
// Contract:
//  - Mutex: an exclusive, non-recursive lock. The thread that locks it unlocks it;
//    locking it again from the same thread deadlocks. Neither copyable nor movable.
//    lock()/unlock() are for the few places that drop the lock mid-function (and
//    CondVar); everything else holds it through a MutexLock.
//  - MutexLock: holds a Mutex from its construction to the end of its scope.
//  - CondVar: every wait takes the Mutex the caller holds (REQUIRES it), releases it
//    atomically while blocked and holds it again when it returns. Waking may be
//    spurious, so callers wait in a loop over their condition:
//        MutexLock lock(mutex_);
//        while (!ready_) ready_cv_.wait(mutex_);
//    There are deliberately no predicate overloads: the analysis checks a lambda as a
//    function of its own, without the caller's lock, so a predicate reading a GUARDED_BY
//    member is rejected. A lambda that runs under the lock says so and is then checked
//    at its calls: `const auto room = [&]() REQUIRES(mutex_) { return used_ < cap_; };`
//    notify_one/notify_all may be called with or without the mutex held.
//  - Thread safety: these are the synchronisation; all methods may be called from any
//    thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "aspen/util/thread_annotations.h"

namespace aspen {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mutex_.lock(); }
  void unlock() RELEASE() { mutex_.unlock(); }

 private:
  friend class CondVar;  // waits on the std::mutex itself
  std::mutex mutex_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~MutexLock() RELEASE() { mutex_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mutex_;
};

class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Blocks until notified (or a spurious wake-up).
  void wait(Mutex& mutex) REQUIRES(mutex) {
    // The caller owns the lock: adopt it for the wait and hand it back after.
    std::unique_lock<std::mutex> lock(mutex.mutex_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }

  // Blocks until notified, a spurious wake-up, or `deadline`. Returns false when it
  // woke because the deadline had passed; either way the caller re-checks its condition.
  bool wait_until(Mutex& mutex, std::chrono::steady_clock::time_point deadline)
      REQUIRES(mutex) {
    std::unique_lock<std::mutex> lock(mutex.mutex_, std::adopt_lock);
    const std::cv_status status = cv_.wait_until(lock, deadline);
    lock.release();
    return status == std::cv_status::no_timeout;
  }

  // wait_until(now + timeout).
  template <class Rep, class Period>
  bool wait_for(Mutex& mutex, const std::chrono::duration<Rep, Period>& timeout)
      REQUIRES(mutex) {
    return wait_until(mutex, std::chrono::steady_clock::now() +
                                 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                     timeout));
  }

  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace aspen
