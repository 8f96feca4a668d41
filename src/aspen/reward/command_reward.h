// CommandReward (verifier kind "command"): a user's reward function as a long-lived
// child process speaking JSON lines, so that any language can score responses and a
// Python function is a ten-line script (docs/rewards.md shows one).
//
// Protocol, one line per response, in order:
//   in  (Aspen -> stdin):  {"prompt": str, "response": str, "answer": <ground truth>,
//                           "metadata": {"id": example id, ...}, "request_id": int}
//   out (stdout -> Aspen): {"score": number, "request_id": int, "extra": {...}}
// "extra" and "request_id" are optional; a request_id, when given, must be the one of
// the request answered (unique per request over the verifier's life). |score| is at
// most kMaxRewardMagnitude (verifier.h). Exactly one reply line per request line:
// extra lines are an error (LineProcess), never read as the next request's reply.
// A batch is written as it is read (the child may answer each line before reading the
// next); its stderr is Aspen's, for the script's own diagnostics.
//
// Options (data.verifier_options, or a weighted component's options):
//   command      required: run with /bin/sh -c
//   timeout_s    per batch, default 60: no full reply by then is a failure
//   max_restarts default 2: a batch whose child died or timed out is retried on a
//                fresh child this many times, then the error is raised
// Errors (aspen::Error naming the command): the child cannot start, dies or times out
// more than max_restarts times in a row, or writes a line that is not such an object
// (the error quotes the line and the request it answered; this is a script bug, so it
// is not retried), prints more lines than requests, a score out of bounds or another
// request's request_id.
// Thread safety: score()/score_batch() may be called from any thread; calls are
// serialised on the one child.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "aspen/reward/imports.h"
#include "aspen/reward/verifier.h"
#include "aspen/util/line_process.h"
#include "aspen/util/mutex.h"

namespace aspen::reward {

struct CommandRewardOptions {
  std::string command;
  double timeout_s = 60.0;
  int max_restarts = 2;
  static CommandRewardOptions from_json(const nlohmann::json& options);
};

class CommandReward : public Verifier {
 public:
  explicit CommandReward(CommandRewardOptions options);
  std::string name() const override { return "command"; }
  double score(const RewardInput& input) const override;
  std::vector<double> score_batch(const std::vector<RewardInput>& inputs) const override;
  // Children started so far (restarts included); for tests and metrics.
  int processes_started() const;

 private:
  CommandRewardOptions options_;
  mutable std::atomic<uint64_t> next_request_id_{0};
  mutable Mutex mutex_;
  mutable LineProcess process_ GUARDED_BY(mutex_);
};

}  // namespace aspen::reward
