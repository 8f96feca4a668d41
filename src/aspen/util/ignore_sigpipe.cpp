#include "aspen/util/ignore_sigpipe.h"

#include <csignal>
#include <mutex>

namespace aspen {

void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      signal(SIGPIPE, SIG_IGN);
    }
  });
}

}  // namespace aspen
