// Sampler: draws one token per row of a logits batch, each row with its own
// SamplingParams and its own random stream.
//
// Reproducibility: a row's draw depends only on (its seed, its step, its logits):
// a counter-based generator gives the uniform for step s of a request, so the same
// seed yields the same tokens whatever else shares the batch, on any device.
//
// Log-probs (what RL needs): `policy_logprob` is log softmax(logits)[token] at
// temperature 1 over the whole vocabulary, with no filtering or suppression —
// the quantity the trainer recomputes. `sampling_logprob` is the log-probability
// under the distribution actually sampled from (temperature, top-k/p, min-p,
// suppression applied, renormalised); 0 for greedy.
// Thread safety: stateless; concurrent calls are fine.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "aspen/rollout/imports.h"
#include "aspen/rollout/sampling_params.h"

namespace aspen::rollout {

struct SamplingRow {
  const SamplingParams* params = nullptr;
  uint64_t seed = 0;  // the request's seed
  int64_t step = 0;   // index of the token being drawn within the request
  // Ids that may not be drawn now (stop ids and EOS before min_tokens).
  std::vector<TokenId> suppressed;
};

struct SampledToken {
  TokenId token = 0;
  float policy_logprob = 0.0f;
  float sampling_logprob = 0.0f;
};

// logits: [B, V] any float dtype, any device (copied to CPU fp32). rows.size() == B.
std::vector<SampledToken> sample_tokens(const torch::Tensor& logits,
                                        const std::vector<SamplingRow>& rows);

// The uniform in [0, 1) that step `step` of a request seeded `seed` draws with.
double sampling_uniform(uint64_t seed, int64_t step);

}  // namespace aspen::rollout
