// Sequence: one sample being generated — its tokens (prompt + output so far),
// how many of them have KV in the cache, its block table, and what RL needs per
// generated token (policy log-prob at temperature 1, sampling log-prob, the
// policy version that produced it).
//
// A request with n samples starts as ONE sequence (fanout = n) so its prompt is
// computed once; when the prompt's prefill completes, the engine forks it into n
// sequences that share the prompt's blocks.
//
// The single rule of the scheduler (as in vLLM v1): num_computed_tokens catches up
// with tokens.size(); once it has, the last token's logits give the next token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aspen/rollout/block_pool.h"
#include "aspen/rollout/imports.h"
#include "aspen/rollout/sampling_params.h"

namespace aspen::rollout {

enum class FinishReason { kNone, kStop, kLength, kAbort };

inline const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kNone:
      break;
  }
  return "none";
}

struct Sequence {
  int64_t id = 0;
  int64_t request_index = 0;  // engine-wide admission order of its request
  std::string request_id;
  int64_t sample_index = 0;
  int64_t fanout = 1;  // > 1: the shared prompt of a group, forked after prefill
  const SamplingParams* params = nullptr;  // owned by the engine's request record
  uint64_t seed = 0;

  std::vector<TokenId> tokens;
  int64_t prompt_len = 0;
  int64_t num_computed_tokens = 0;
  std::vector<BlockId> block_table;
  std::vector<BlockHash> block_hashes;  // of the leading full blocks, once computed

  std::vector<float> policy_logprobs;    // per output token
  std::vector<float> sampling_logprobs;  // per output token
  std::vector<int64_t> policy_versions;  // per output token
  std::vector<int32_t> routed_experts;   // per output token: sparse layers x k (if recorded)
  std::string text;                      // decoded output, when stop strings need it
  bool matched_stop_string = false;      // text was cut at a stop string
  FinishReason finish_reason = FinishReason::kNone;
  int64_t num_preemptions = 0;

  int64_t num_output_tokens() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }
  int64_t num_pending_tokens() const {
    return static_cast<int64_t>(tokens.size()) - num_computed_tokens;
  }
  bool finished() const { return finish_reason != FinishReason::kNone; }
};

}  // namespace aspen::rollout
