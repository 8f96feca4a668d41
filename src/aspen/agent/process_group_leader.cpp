#include "aspen/agent/process_group_leader.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "aspen/agent/imports.h"

namespace aspen::agent {

ProcessGroupLeader::ProcessGroupLeader(pid_t pid) : pid_(pid) { setpgid(pid_, pid_); }

ProcessGroupLeader::~ProcessGroupLeader() {
  if (!reaped_) kill_and_reap();
}

bool ProcessGroupLeader::exited() const {
  siginfo_t info{};
  return waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == pid_;
}

int ProcessGroupLeader::kill_and_reap() {
  if (reaped_) return status_;
  kill(-pid_, SIGKILL);
  while (waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  return status_;
}

}  // namespace aspen::agent
