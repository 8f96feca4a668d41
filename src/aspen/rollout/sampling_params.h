// SamplingParams: how one request's tokens are drawn and when it stops, with the
// meanings vLLM (v1) gives them. Order of the sampling steps, as in vLLM's sampler:
// temperature -> min-p -> top-k -> top-p -> draw. Temperature 0 means greedy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "aspen/rollout/imports.h"
#include "aspen/tokenizer/tokenizer.h"

namespace aspen::rollout {

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 0;         // 0 or -1 (vLLM's "disabled"): off; below -1: an error
  double top_p = 1.0;        // (0, 1]; 1: off
  double min_p = 0.0;        // [0, 1]; keep tokens with p >= min_p * p_max
  // Reproducibility: the same seed gives the same tokens whatever else shares the
  // batch, up to the floating point of other batch sizes (rollout/engine.h). Unseeded
  // requests get a seed from the engine's own seeded stream.
  std::optional<uint64_t> seed;
  int64_t max_tokens = 16;              // generated tokens at most
  int64_t min_tokens = 0;               // stop ids (and EOS) are suppressed until this many
  std::vector<TokenId> stop_token_ids;  // in addition to the model's EOS ids
  std::vector<std::string> stop;        // stop strings; the match is cut from the text
  bool ignore_eos = false;

  bool greedy() const { return temperature == 0.0; }
  // Throws aspen::Error naming `source` (e.g. "request 3") for out-of-range values.
  void validate(const std::string& source) const;
};

}  // namespace aspen::rollout
