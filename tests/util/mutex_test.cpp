// The annotated locks (util/mutex.h, util/shared_mutex.h) against real threads: a held
// lock keeps others out until its scope ends, a condition variable hands the lock back
// on wake-up and reports its deadline, and a reader/writer lock lets readers share.
// (That clang rejects unguarded access is tools/check_thread_safety.py's own self-test.)
#include "aspen/util/mutex.h"
#include "aspen/util/shared_mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace aspen {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

// Long enough for a thread that is not blocked to get through on a loaded 2-core CI
// machine; only the failure path waits this long.
constexpr auto kPatience = std::chrono::seconds(10);
// How long a blocked thread is watched to stay blocked.
constexpr auto kBlockedFor = milliseconds(50);

TEST(Mutex, MutexLockKeepsOtherThreadsOutUntilItsScopeEnds) {
  Mutex mutex;
  std::atomic<bool> entered{false};
  std::thread other;
  {
    MutexLock lock(mutex);
    other = std::thread([&] {
      MutexLock inner(mutex);
      entered = true;
    });
    std::this_thread::sleep_for(kBlockedFor);
    EXPECT_FALSE(entered);
  }
  other.join();
  EXPECT_TRUE(entered);
}

TEST(Mutex, ConcurrentIncrementsUnderTheLockAreNeverLost) {
  struct Counter {
    Mutex mutex;
    int64_t value GUARDED_BY(mutex) = 0;
  } counter;
  constexpr int kThreads = 4, kIncrements = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        MutexLock lock(counter.mutex);
        counter.value = counter.value + 1;  // read, then write: a lost update shows
      }
    });
  }
  for (std::thread& t : threads) t.join();
  MutexLock lock(counter.mutex);
  EXPECT_EQ(counter.value, int64_t{kThreads} * kIncrements);
}

TEST(Mutex, UnlockInsideTheScopeLetsOthersInAndLockTakesItBack) {
  Mutex mutex;
  std::atomic<bool> entered{false};
  MutexLock lock(mutex);
  std::thread other([&] {
    MutexLock inner(mutex);
    entered = true;
  });
  mutex.unlock();
  other.join();  // would hang if unlock() had not released it
  mutex.lock();  // the scope's destructor unlocks it again
  EXPECT_TRUE(entered);
}

TEST(CondVar, WaitReturnsHoldingTheMutexOnceTheConditionIsSignalled) {
  Mutex mutex;
  CondVar ready_cv;
  bool ready = false;
  std::atomic<bool> other_entered{false};
  std::thread signaller([&] {
    {
      MutexLock lock(mutex);
      ready = true;
    }
    ready_cv.notify_all();
  });
  MutexLock lock(mutex);
  while (!ready) ready_cv.wait(mutex);
  signaller.join();
  // Held again on return: a third thread cannot get in while this scope lasts.
  std::thread third([&] {
    MutexLock inner(mutex);
    other_entered = true;
  });
  std::this_thread::sleep_for(kBlockedFor);
  EXPECT_FALSE(other_entered);
  mutex.unlock();
  third.join();
  mutex.lock();
  EXPECT_TRUE(other_entered);
}

TEST(CondVar, WaitForReportsNoTimeoutWhenNotifiedBeforeTheDeadline) {
  Mutex mutex;
  CondVar ready_cv;
  bool ready = false;
  std::thread signaller([&] {
    std::this_thread::sleep_for(milliseconds(10));
    MutexLock lock(mutex);
    ready = true;
    ready_cv.notify_one();
  });
  {
    MutexLock lock(mutex);
    while (!ready) ASSERT_TRUE(ready_cv.wait_for(mutex, kPatience));
  }
  signaller.join();
}

TEST(CondVar, WaitUntilReportsTheDeadlineOnlyOnceItHasPassed) {
  Mutex mutex;
  CondVar never_signalled;
  MutexLock lock(mutex);
  const auto start = steady_clock::now();
  const auto deadline = start + milliseconds(30);
  // A spurious wake-up before the deadline answers true; the loop waits it out.
  while (never_signalled.wait_until(mutex, deadline)) {
    ASSERT_LT(steady_clock::now() - start, kPatience);
  }
  EXPECT_GE(steady_clock::now(), deadline);
  EXPECT_FALSE(never_signalled.wait_until(mutex, start));  // already past: at once
}

TEST(SharedMutex, ReadersHoldItTogether) {
  SharedMutex mutex;
  ReaderMutexLock first(mutex);
  std::promise<void> second_in;
  std::thread second([&] {
    ReaderMutexLock lock(mutex);
    second_in.set_value();
  });
  EXPECT_EQ(second_in.get_future().wait_for(kPatience), std::future_status::ready);
  second.join();
}

TEST(SharedMutex, AWriterKeepsReadersOutAndAReaderKeepsWritersOut) {
  SharedMutex mutex;
  std::atomic<bool> reader_in{false}, writer_in{false};
  std::thread reader;
  {
    WriterMutexLock writer(mutex);
    reader = std::thread([&] {
      ReaderMutexLock lock(mutex);
      reader_in = true;
    });
    std::this_thread::sleep_for(kBlockedFor);
    EXPECT_FALSE(reader_in);
  }
  reader.join();
  EXPECT_TRUE(reader_in);

  std::thread writer;
  {
    ReaderMutexLock lock(mutex);
    writer = std::thread([&] {
      WriterMutexLock inner(mutex);
      writer_in = true;
    });
    std::this_thread::sleep_for(kBlockedFor);
    EXPECT_FALSE(writer_in);
  }
  writer.join();
  EXPECT_TRUE(writer_in);
}

}  // namespace
}  // namespace aspen
