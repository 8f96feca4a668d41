// SharedMutex, ReaderMutexLock and WriterMutexLock: std::shared_mutex carrying Clang's
// thread-safety annotations (util/thread_annotations.h), for state that many threads
// read at once and few write. A GUARDED_BY(shared_mutex) member may be read under either
// lock and written only under the writer's; clang checks both (util/mutex.h explains
// the check). Names follow absl::ReaderMutexLock / absl::WriterMutexLock.
//
// Contract:
//  - SharedMutex: any number of readers or one writer at a time; non-recursive (a thread
//    holding it in either mode must not lock it again). Neither copyable nor movable.
//  - ReaderMutexLock / WriterMutexLock: hold it shared / exclusive for their scope.
//  - Thread safety: these are the synchronisation; all methods may be called from any
//    thread.
#pragma once

#include <shared_mutex>

#include "aspen/util/thread_annotations.h"

namespace aspen {

class CAPABILITY("shared mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void lock() ACQUIRE() { mutex_.lock(); }
  void unlock() RELEASE() { mutex_.unlock(); }
  void lock_shared() ACQUIRE_SHARED() { mutex_.lock_shared(); }
  void unlock_shared() RELEASE_SHARED() { mutex_.unlock_shared(); }

 private:
  std::shared_mutex mutex_;
};

class SCOPED_CAPABILITY ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex& mutex) ACQUIRE_SHARED(mutex) : mutex_(mutex) {
    mutex_.lock_shared();
  }
  ~ReaderMutexLock() RELEASE() { mutex_.unlock_shared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex& mutex_;
};

class SCOPED_CAPABILITY WriterMutexLock {
 public:
  explicit WriterMutexLock(SharedMutex& mutex) ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~WriterMutexLock() RELEASE() { mutex_.unlock(); }
  WriterMutexLock(const WriterMutexLock&) = delete;
  WriterMutexLock& operator=(const WriterMutexLock&) = delete;

 private:
  SharedMutex& mutex_;
};

}  // namespace aspen
