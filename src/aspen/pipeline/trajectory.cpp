#include "aspen/pipeline/trajectory.h"
#include "aspen/pipeline/imports.h"

#include <limits>

#include "aspen/util/error.h"

namespace aspen::pipeline {

std::string trajectory_end_name(TrajectoryEnd end) {
  switch (end) {
    case TrajectoryEnd::kDone:
      return "done";
    case TrajectoryEnd::kMaxTurns:
      return "max_turns";
    case TrajectoryEnd::kMaxTokens:
      return "max_tokens";
    case TrajectoryEnd::kEnvironment:
      return "environment_error";
  }
  return "unknown";
}

std::vector<TokenId> Trajectory::context() const {
  std::vector<TokenId> tokens = prompt;
  tokens.insert(tokens.end(), response.begin(), response.end());
  return tokens;
}

void Trajectory::append_turn(const Completion& turn) {
  check_input(turn.logprobs.size() == turn.token_ids.size() &&
                  turn.policy_versions.size() == turn.token_ids.size(),
              "a turn's log-probs and versions must pair with its tokens", "trajectory");
  turn_starts.push_back(static_cast<int64_t>(response.size()));
  turn_rewards.push_back(std::numeric_limits<float>::quiet_NaN());
  response.insert(response.end(), turn.token_ids.begin(), turn.token_ids.end());
  logprobs.insert(logprobs.end(), turn.logprobs.begin(), turn.logprobs.end());
  versions.insert(versions.end(), turn.policy_versions.begin(), turn.policy_versions.end());
  loss_mask.insert(loss_mask.end(), turn.token_ids.size(), 1.0F);
}

void Trajectory::append_observation(const std::vector<TokenId>& tokens) {
  check_input(!turn_starts.empty(), "an observation must follow a model turn", "trajectory");
  // An empty turn (the engine stopped at once) has no version of its own: the one
  // before it, else the turn's weights are unknown and the oldest bound stays.
  const int64_t version = versions.empty() ? 0 : versions.back();
  response.insert(response.end(), tokens.begin(), tokens.end());
  logprobs.insert(logprobs.end(), tokens.size(), 0.0F);
  versions.insert(versions.end(), tokens.size(), version);
  loss_mask.insert(loss_mask.end(), tokens.size(), 0.0F);
}

Completion Trajectory::as_completion(int64_t sample_index) const {
  Completion c;
  c.sample_index = sample_index;
  c.prompt_token_ids = prompt;
  c.token_ids = response;
  c.logprobs = logprobs;
  c.policy_versions = versions;
  c.finish_reason = FinishReason::kStop;
  return c;
}

}  // namespace aspen::pipeline
