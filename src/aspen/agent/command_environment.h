// CommandEnvironment (kind "command"): an environment written in any language, as one
// long-lived child process per instance speaking environment_protocol.h's JSON, one
// line per request and one line per reply (like the command reward,
// reward/command_reward.h, on the same LineProcess). The process serves episode after
// episode: each reset() starts a new one. Its stderr is Aspen's, for its diagnostics.
//
// Options:
//   command          run with /bin/sh -c
//   timeout_s        per call (reset or step), default 60
//   max_reply_bytes  per reply line, default 1 MiB
//
// Faults, each the trajectory's error (environment.h), never an exception or a hang:
//   kCrash      the process exited or closed its output (the next call starts a new one);
//   kTimeout    no reply within timeout_s: the process group is killed, the next call
//               starts a new one;
//   kOversized  a reply line over max_reply_bytes: killed and restarted likewise (a
//               process printing 10 MB is read only up to the cap);
//   kGarbage    a reply that is not the protocol's JSON, or more than one line per
//               request (the extra output is killed with the process);
//   kRefused    {"error": ...}, or step() without an episode (before reset, or after the
//               episode ended or failed).
// A fault ends the episode: the process's state for it is gone or suspect, so the
// caller resets (a restarted process gets only the reset). Each call also waits
// LineProcess::kQuietAfterReplies (25 ms) for extra lines after the reply.
// processes_started() counts restarts, for metrics.
// Thread safety: as Environment (one trajectory at a time per instance; the process is
// the instance's own).
#pragma once

#include <cstddef>
#include <string>

#include "aspen/agent/environment.h"
#include "aspen/agent/environment_protocol.h"
#include "aspen/agent/imports.h"
#include "aspen/util/line_process.h"

namespace aspen::agent {

struct CommandEnvironmentOptions {
  std::string command;
  double timeout_s = 60;
  size_t max_reply_bytes = size_t{1} << 20;
};

class CommandEnvironment : public Environment {
 public:
  // Throws aspen::Error for an empty command or limits out of range. The process starts
  // at the first reset().
  explicit CommandEnvironment(CommandEnvironmentOptions options);

  std::string kind() const override { return "command"; }
  ResetResult reset(const nlohmann::ordered_json& row) override;
  StepResult step(const std::string& turn) override;

  int processes_started() const { return process_.starts(); }

 private:
  // Sends one request line and returns its reply; sets `error` instead on a fault.
  std::string call(const std::string& request, std::optional<EnvironmentError>* error);

  CommandEnvironmentOptions options_;
  std::string source_;  // "command environment `...`", the start of every error message
  LineProcess process_;
  ProtocolEpisodes episodes_{source_};
};

}  // namespace aspen::agent
