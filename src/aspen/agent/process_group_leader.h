// ProcessGroupLeader: the parent's hold on a forked child that leads its own process
// group (the child calls setpgid(0, 0) before exec; the constructor calls
// setpgid(pid, pid) too, so a kill sent before the child's own call still reaches
// the group). The group is killed before its leader is reaped: while the leader is
// a zombie its pid, the group's id, cannot be reused, so the kill never reaches a
// stranger. What the program started and left in its group goes with it.
//
// Contract: construct right after a successful fork(), in the parent, with the
// child's pid. exited() asks whether the leader has ended WITHOUT reaping it
// (waitid with WNOWAIT), for the reason above. kill_and_reap() sends SIGKILL to the
// group and reaps the leader, once; later calls return the same status. The
// destructor does it if no one did, so every way out (exceptions included) leaves
// no process behind, except one that left the group (setsid).
// Thread safety: one thread. Errors: none (the calls are best effort on a pid this
// object owns).
#pragma once

#include <sys/types.h>

#include "aspen/agent/imports.h"

namespace aspen::agent {

class ProcessGroupLeader {
 public:
  explicit ProcessGroupLeader(pid_t pid);
  ~ProcessGroupLeader();
  ProcessGroupLeader(const ProcessGroupLeader&) = delete;
  ProcessGroupLeader& operator=(const ProcessGroupLeader&) = delete;

  pid_t pid() const { return pid_; }
  // The leader has ended (it stays a zombie until kill_and_reap()).
  bool exited() const;
  // SIGKILL to the whole group, then the leader reaped; its wait status (waitpid's).
  int kill_and_reap();

 private:
  pid_t pid_;
  int status_ = 0;
  bool reaped_ = false;
};

}  // namespace aspen::agent
