#include "aspen/util/thread_affinity.h"

#include <pthread.h>
#include <sched.h>

#include "aspen/util/log.h"

namespace aspen {

void pin_current_thread(const std::vector<int>& cores, const std::string& role) {
  if (cores.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int core : cores) {
    if (core >= 0 && core < CPU_SETSIZE) CPU_SET(core, &set);
  }
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
    log_warn(role, ": could not pin the thread to its cores; running unpinned");
  }
}

}  // namespace aspen
