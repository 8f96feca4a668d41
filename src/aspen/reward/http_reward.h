// HttpReward (verifier kind "http"): responses scored by a reward service over HTTP,
// in batches, e.g. a reward model served elsewhere or a sandbox that runs code.
//
// Request: POST <url> with Content-Type application/json and, when token_env names a
// set environment variable, "Authorization: Bearer <its value>"; the body is
//   {"inputs": [{"prompt", "response", "answer", "metadata": {"id"}}, ...]}
// (the fields of the command reward's lines, reward/command_reward.h). Reply 200 with
//   {"scores": [number, ...]}   or   {"results": [{"score": number, "extra": {...}}, ...]}
// holding one finite score per input, in order.
//
// Options (data.verifier_options, or a weighted component's options):
//   url          required, http://host[:port]/path or https://...
//   timeout_s    per request (connect, read and write), default 60
//   retries      default 3: a connection error, a timeout, a 5xx or a 429 is retried
//                after 0.25 s, 0.5 s, 1 s, ...; then the error is raised
//   concurrency  requests in flight at once, default 4
//   batch_size   inputs per request, default 64
//   token_env    the environment variable holding a bearer token; default none. The
//                token itself is never written to a log or an error.
// Errors (aspen::Error naming the URL): another 4xx (not retried: the request is
// wrong; the reply's first 200 bytes are quoted), retries exhausted, or a 200 reply
// that is not of the form above.
// Thread safety: score()/score_batch() may be called from any thread (each request
// uses a client of its own).
#pragma once

#include <string>
#include <vector>

#include "aspen/reward/imports.h"
#include "aspen/reward/verifier.h"

namespace aspen::reward {

struct HttpRewardOptions {
  std::string url;
  double timeout_s = 60.0;
  int retries = 3;
  int concurrency = 4;
  int batch_size = 64;
  std::string token_env;
  static HttpRewardOptions from_json(const nlohmann::json& options);
};

class HttpReward : public Verifier {
 public:
  explicit HttpReward(HttpRewardOptions options);
  std::string name() const override { return "http"; }
  double score(const RewardInput& input) const override;
  std::vector<double> score_batch(const std::vector<RewardInput>& inputs) const override;

 private:
  // Scores one request's inputs [begin, end), retrying as documented.
  std::vector<double> post_batch(const std::vector<RewardInput>& inputs, size_t begin,
                                 size_t end) const;

  HttpRewardOptions options_;
  std::string origin_;  // scheme://host:port
  std::string path_;    // /path?query
};

}  // namespace aspen::reward
