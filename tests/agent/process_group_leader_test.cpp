// ProcessGroupLeader against real forked children: it sees the leader end without
// reaping it, reaps it with its exit status, and takes down what the leader started
// in its group. The children make only async-signal-safe calls.
#include "aspen/agent/process_group_leader.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace aspen::agent {
namespace {

// Running or a zombie: the pid still names a process.
bool pid_exists(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

// Gone, or a zombie waiting for a parent that is not this test (the grandchild's
// parent is init once its own has died).
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string field, name, state;
  if (!(stat >> field >> name >> state)) return true;
  return state == "Z" || state == "X";
}

template <typename Predicate>
bool within_seconds(double seconds, Predicate predicate) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return predicate();
}

TEST(ProcessGroupLeader, SeesTheLeaderEndWithoutReapingItThenReapsItWithItsStatus) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    usleep(100 * 1000);
    _exit(3);
  }
  ProcessGroupLeader child(pid);
  EXPECT_FALSE(child.exited());
  ASSERT_TRUE(within_seconds(10, [&] { return child.exited(); }));
  EXPECT_TRUE(pid_exists(pid)) << "exited() reaped the leader";
  const int status = child.kill_and_reap();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  EXPECT_FALSE(pid_exists(pid));
  EXPECT_EQ(child.kill_and_reap(), status);  // once only: the same status again
}

TEST(ProcessGroupLeader, OnDestructionKillsTheWholeGroupWithWhatTheLeaderStarted) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      for (;;) pause();
    }
    if (write(pipe_fds[1], &grandchild, sizeof grandchild) != sizeof grandchild) _exit(1);
    for (;;) pause();
  }
  close(pipe_fds[1]);
  pid_t grandchild = -1;
  {
    ProcessGroupLeader child(pid);
    ASSERT_EQ(read(pipe_fds[0], &grandchild, sizeof grandchild),
              static_cast<ssize_t>(sizeof grandchild));
    ASSERT_GT(grandchild, 0);
    EXPECT_FALSE(child.exited());
  }
  close(pipe_fds[0]);
  EXPECT_FALSE(pid_exists(pid)) << "the leader was not reaped";
  const bool gone = within_seconds(10, [&] { return ended(grandchild); });
  EXPECT_TRUE(gone) << "the group kill missed the leader's child " << grandchild;
  if (!gone) kill(grandchild, SIGKILL);  // nothing left behind, even on failure
}

}  // namespace
}  // namespace aspen::agent
