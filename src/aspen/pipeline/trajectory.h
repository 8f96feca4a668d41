// Trajectory: one multi-turn sample as the tokens it is trained on (issue #35, items 1
// and 2). A trajectory is the prompt (reset()'s conversation as the chat template renders
// it, with the tools and the generation prompt) followed by its response: each model
// turn exactly as the engine generated it (loss mask 1, the engine's rollout log-probs
// and policy versions), then the observation tokens the environment's reply appends
// (loss mask 0: the tokens of observation_suffix(), as the template renders the tool or
// user messages and the next generation prompt; agent/environment.h's token contract).
// Nothing is decoded and re-encoded: the next turn's prompt is prompt + response, token
// for token.
//
// Observation tokens carry rollout log-prob 0 (never read: the mask) and the policy
// version of the model token before them, so a row's oldest version is its oldest model
// token's and the per-token versions never decrease (rollout_worker.h).
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aspen/pipeline/imports.h"
#include "aspen/rollout/engine.h"

namespace aspen::pipeline {

// Why a trajectory ended; stable names (trajectory_end_name) for metrics.
enum class TrajectoryEnd {
  kDone,          // the environment said done (with its reward)
  kMaxTurns,      // rollout.environment.max_turns model turns (the environment's limit)
  kMaxTokens,     // rollout.environment.max_trajectory_tokens: no room for another turn
  kEnvironment,   // the environment failed (crash, hang, garbage, oversized reply)
};
std::string trajectory_end_name(TrajectoryEnd end);

struct Trajectory {
  std::vector<TokenId> prompt;         // the rendered conversation reset() returned
  std::vector<TokenId> response;       // model and observation tokens, in order
  std::vector<float> logprobs;         // per response token; 0 for observation tokens
  std::vector<int64_t> versions;       // per response token
  std::vector<float> loss_mask;        // per response token: 1 model, 0 observation
  std::vector<int64_t> turn_starts;    // offset of each model turn in `response`
  std::vector<float> turn_rewards;     // per model turn; NaN: the environment gave none
  double reward = 0;                   // the trajectory's reward (set when it ends)
  bool has_reward = false;             // the environment gave one (else: the verifier)
  TrajectoryEnd end = TrajectoryEnd::kDone;
  std::string error;                   // kEnvironment: the environment's one-line error
  // Figures for the run's metrics.
  int64_t tool_calls = 0;
  int64_t tool_errors = 0;
  double tool_wait_s = 0;

  int64_t turns() const { return static_cast<int64_t>(turn_starts.size()); }
  // The context the next turn is generated from: prompt + response.
  std::vector<TokenId> context() const;
  // Appends one model turn: the tokens, log-probs and versions of `turn` (a finished
  // engine completion of context()). aspen::Error if its fields do not pair up.
  void append_turn(const Completion& turn);
  // Appends observation tokens (mask 0, log-prob 0, the last model token's version).
  // aspen::Error before any model turn.
  void append_observation(const std::vector<TokenId>& tokens);
  // The trajectory as one engine completion (the row's response, rollout_logprobs and
  // rollout_versions columns), sample `sample_index`.
  Completion as_completion(int64_t sample_index) const;
};

}  // namespace aspen::pipeline
