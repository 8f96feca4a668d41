// TrainBatch: the rows a trainer consumes - (prompt, response) token ids plus the RL
// columns the dock delivered for them - in the packed, pad-free layout of algo.
//
// Shapes: B = rows, R = total response tokens = sum_b |response_b|.
//   prompts[b], responses[b]: host token ids (a prompt must be non-empty: its last
//     token predicts the first response token; a response may be empty).
//   token_columns[name]: [R] packed in row order, row b owning response_offsets()[b] ..
//     response_offsets()[b+1]-1 (e.g. "advantages", "old_logprobs", "ref_logprobs").
//   row_columns[name]: [B] (e.g. "scores").
// The column names below are the ones the trainers in this folder read.
//
// Errors: validate() throws aspen::Error naming the column or row that is malformed.
// Thread safety: a plain value; concurrent readers are fine.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "aspen/train/imports.h"

namespace aspen::train {

namespace columns {
inline constexpr const char* kAdvantages = "advantages";
inline constexpr const char* kOldLogprobs = "old_logprobs";
inline constexpr const char* kRefLogprobs = "ref_logprobs";
inline constexpr const char* kBehaviourLogprobs = "behaviour_logprobs";  // rollout policy
// MoE: [R, S * k] int32, the experts the rollout's S sparse layers chose (k each) at the
// position that predicted each response token (Completion::routed_experts).
inline constexpr const char* kBehaviourRoutedExperts = "behaviour_routed_experts";
inline constexpr const char* kValues = "values";    // critic values at rollout time
inline constexpr const char* kReturns = "returns";  // value targets
// Multi-turn trajectories (issue #35): [R] fp32, 1 for a token the policy generated
// (trained on), 0 for an environment token (a tool result or observation the chat
// template rendered into the context: it conditions later tokens but is never trained
// on and has no rollout log-prob). Absent: every response token is the model's.
inline constexpr const char* kLossMask = "loss_mask";
}  // namespace columns

struct TrainBatch {
  std::vector<std::vector<int64_t>> prompts;
  std::vector<std::vector<int64_t>> responses;
  std::map<std::string, torch::Tensor> token_columns;  // each [R]
  std::map<std::string, torch::Tensor> row_columns;    // each [B]

  int64_t num_rows() const { return static_cast<int64_t>(prompts.size()); }
  // B+1 offsets of each row's response tokens in the token columns.
  std::vector<int64_t> response_offsets() const;
  int64_t num_response_tokens() const;
  // The response tokens the policy generated: the loss_mask column's ones, or every
  // response token without one. What every token-mean denominator counts.
  int64_t num_loss_tokens() const;
  // Throws aspen::Error unless prompts/responses pair up, prompts are non-empty and
  // every column has R (resp. B) entries on its first dimension, and a loss_mask is
  // [R] with every entry 0 or 1.
  void validate() const;
  // The token column `name`; aspen::Error naming `who` if absent.
  const torch::Tensor& token_column(const std::string& name, const std::string& who) const;
};

}  // namespace aspen::train
