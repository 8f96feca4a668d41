// The sampler on the logits' device: sample_tokens (sampler.h) as batched torch ops,
// so that a decode step sends back the sampled ids and their two log-probs (24 bytes a
// row, one device-to-host copy) instead of the whole [R, V] fp32 logits.
//
// Same contract and the same draws as the host sampler: temperature, suppression,
// min-p, top-k, top-p in vLLM's order, ties broken by the lower id, the inverse-CDF
// draw over the kept tokens in vocabulary order with the counter-based uniform
// sampling_uniform(seed, step) (computed on the host, where seed and step are), the
// policy and sampling log-probs as sampler.h defines them. The arithmetic is the host
// sampler's, operation by operation (fp32 scaling, fp64 weights and sums), so on CPU
// tensors the tokens agree one for one and the log-probs to fp32 rounding. On a GPU the
// fp64 sums run in another order (a parallel scan), so a draw falling within ~1e-15 of
// a cut or a cumulative boundary may pick the neighbouring token.
//
// Cost: independent of R in launches; a sort of each row only when some row uses top-k
// or top-p. Host traffic: one upload (per-row parameters, uniforms, suppressed ids),
// one download ([R, 3] fp64). Edge cases that the host sampler resolves by scanning
// (every token of a row suppressed or -inf) give token 0, as there.
// Thread safety: stateless.
#pragma once

#include <torch/types.h>

#include <vector>

#include "aspen/rollout/imports.h"
#include "aspen/rollout/sampler.h"

namespace aspen::rollout {

// logits: [B, V] any float dtype, on any device (CPU tensors too: that is how it is
// tested). rows.size() == B.
std::vector<SampledToken> sample_tokens_on_device(const torch::Tensor& logits,
                                                  const std::vector<SamplingRow>& rows);

}  // namespace aspen::rollout
