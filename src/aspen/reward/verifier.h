// Verifier: the reward interface. A verifier turns one (prompt, response, ground truth)
// triple into a scalar score; verifiers are rule-based (no model), so a reward worker can
// score rows on any thread without a device.
//
// Contract: score() never throws for any response text (model output is untrusted and a
// malformed answer is a low score, not an error); it may throw aspen::Error when the
// ground truth itself is malformed (that is a dataset bug), and an external reward
// (command, http) when its service fails. score_batch() scores many inputs at once, in
// order; external rewards override it to send one batch per call. Construction validates options
// and throws aspen::Error naming the bad key.
// Thread safety: implementations are immutable after construction; score() is const and
// may be called concurrently from any number of threads.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aspen/reward/imports.h"

namespace aspen::reward {

struct RewardInput {
  std::string prompt;           // the prompt text as the policy saw it (after any template)
  std::string response;         // the generated text, special tokens already stripped
  nlohmann::json ground_truth;  // verifier-specific: an answer string/number, {target, numbers}...
  nlohmann::json metadata = nlohmann::json::object();  // {"id": example id}, for external rewards
};

// What an external reward (command, http) receives for one input: the one wire form
// of a RewardInput, {"prompt", "response", "answer", "metadata"}.
inline nlohmann::json external_reward_request(const RewardInput& input) {
  return {{"prompt", input.prompt},
          {"response", input.response},
          {"answer", input.ground_truth},
          {"metadata", input.metadata}};
}

// The largest |score| an external reward (command, http) may return. Scores are
// averaged, differenced into advantages and squared into standard deviations, some of
// it in float32 (max 3.4e38): a score of 1e308 overflows the mean to inf, written as
// JSON null. 1e6 leaves every such sum finite for any batch Aspen can hold, and is
// far beyond any reward scale in use (verl's and TRL's rules score in [-1, 1] or so);
// a larger reply is a bug in the script, refused with the value and the reply.
inline constexpr double kMaxRewardMagnitude = 1e6;

class Verifier {
 public:
  virtual ~Verifier() = default;
  // A short kind name: "math", "format", "countdown", "weighted".
  virtual std::string name() const = 0;
  virtual double score(const RewardInput& input) const = 0;
  virtual std::vector<double> score_batch(const std::vector<RewardInput>& inputs) const {
    std::vector<double> scores;
    scores.reserve(inputs.size());
    for (const RewardInput& input : inputs) scores.push_back(score(input));
    return scores;
  }
};

}  // namespace aspen::reward
