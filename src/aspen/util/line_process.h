// LineProcess: a long-lived child process spoken to in lines: we write request lines
// to its stdin and read one reply line per request from its stdout (its stderr is
// ours, so its diagnostics reach the user's terminal). Started with `/bin/sh -c
// command`, so a command line is written as in a shell.
//
// exchange() writes every request and reads as many replies, interleaving the two
// with poll(): a child that answers each line before reading the next never blocks
// on a full pipe, whatever the batch size. It fails with aspen::Error naming the
// command when the deadline passes, the child exits or closes its stdout before
// answering everything, or a reply line exceeds max_line_bytes.
//
// One reply line per request line, strictly: a child that prints more must fail, never
// have its extra lines read as the replies to later requests. exchange() therefore also
// fails when the child had printed anything before the batch was written, when it
// printed all the replies before it was sent all the requests, or when more output
// follows the last reply within kQuietAfterReplies (a script printing two lines per
// input prints the extras at once). A slow script's extra lines after that are caught
// at the next exchange(); callers that need a per-reply guarantee echo an id (as
// CommandReward does with request_id). These failures throw UnrequestedOutput.
//
// What failed is kept as failure() (the environments of the agent module report a hang,
// a crash and an oversized reply as different faults); the text stays in the exception.
//
// After any failure the child is killed (SIGKILL to its process group: the shell and
// whatever it started, reaped); the next exchange() starts a fresh one.
//
// The child dies with this process: its process group (the command and everything it
// started) gets SIGKILL when Aspen exits, even by SIGKILL, so a killed `aspen eval`
// leaves no reward script running. A small /bin/sh watcher leads the group and waits
// for end of file on a pipe that only Aspen holds open (line_process.cpp).
//
// Writing to a dead child must not kill this process: the first LineProcess sets
// SIGPIPE to ignored when it is at its default (writes then fail with EPIPE).
// Thread safety: none; one owner (callers serialise exchange()).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "aspen/util/error.h"

namespace aspen {

// What exchange() throws when the child printed output that answers no request: a bug
// in the child, not a transient fault, so a caller that retries failures should not
// retry this one (a fresh child would hide it).
class UnrequestedOutput : public Error {
 public:
  using Error::Error;
};

class LineProcess {
 public:
  // How long exchange() watches for output after the last reply (see above): short,
  // since it is paid once per batch.
  static constexpr std::chrono::milliseconds kQuietAfterReplies{25};

  // Why the last exchange() failed; kNone after one that succeeded.
  enum class Failure {
    kNone,
    kTimeout,      // the deadline passed before every reply was read
    kExited,       // the child exited, closed its output or stopped reading its input
    kLineTooLong,  // a reply line over max_line_bytes
    kUnrequested,  // output that answers no request (UnrequestedOutput)
    kOther,        // a system call failed (poll, read)
  };

  explicit LineProcess(std::string command, size_t max_line_bytes = size_t{16} << 20);
  ~LineProcess();
  LineProcess(const LineProcess&) = delete;
  LineProcess& operator=(const LineProcess&) = delete;

  // Sends each request (a line without its '\n') and returns one reply per request,
  // in order, without their '\n'. Starts the child if it is not running.
  std::vector<std::string> exchange(const std::vector<std::string>& requests,
                                    std::chrono::steady_clock::time_point deadline);

  const std::string& command() const { return command_; }
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // How many children were started so far (1 after the first exchange; more after
  // restarts).
  int starts() const { return starts_; }
  Failure failure() const { return failure_; }
  // Kills and reaps the child, if any.
  void stop();

 private:
  void start();
  [[noreturn]] void fail(Failure failure, const std::string& problem);
  [[noreturn]] void fail_unrequested(const std::string& problem);  // throws UnrequestedOutput
  // Fails when the child prints anything within `wait` (or already has): output that
  // answers none of the `requests` just answered (0: between batches).
  void check_no_unrequested_output(std::chrono::milliseconds wait, size_t requests);

  std::string command_;
  size_t max_line_bytes_;
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  int life_ = -1;  // the pipe whose end of file tells the watcher that Aspen exited
  std::string pending_;  // bytes read past the last complete line
  int starts_ = 0;
  Failure failure_ = Failure::kNone;
};

}  // namespace aspen
