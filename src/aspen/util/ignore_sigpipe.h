// ignore_sigpipe_once: a process that writes to a child's pipe must not die when the child
// has exited (SIGPIPE's default action); the write then fails with EPIPE, which the
// caller handles. Set once per process, and only if nobody installed a handler of their
// own (an embedding program's choice is kept).
// Thread safety: safe to call from any thread, any number of times.
#pragma once

namespace aspen {

void ignore_sigpipe_once();

}  // namespace aspen
