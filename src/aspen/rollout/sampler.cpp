#include "aspen/rollout/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "aspen/rollout/imports.h"

namespace aspen::rollout {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

struct Candidate {
  float scaled_logit;
  TokenId token;
  double weight;  // exp(scaled_logit - max scaled logit): unnormalised probability
};

// Descending by logit; ties by id so the order (and thus the cut) is deterministic.
bool higher(const Candidate& a, const Candidate& b) {
  return a.scaled_logit > b.scaled_logit || (a.scaled_logit == b.scaled_logit && a.token < b.token);
}

// The candidate the top-p cut ends at: the last one, in `higher` order, of the shortest
// prefix whose weight reaches top_p of the total. A weighted quickselect (nth_element
// halves the range each round, O(V) expected) instead of sorting the vocabulary
// (151,936 entries for Qwen: ~11 ms a row sorted, see docs/benchmarks.md). `scratch`
// is permuted.
Candidate top_p_cut(std::vector<Candidate>& scratch, double top_p) {
  double total = 0.0;
  for (const auto& c : scratch) total += c.weight;
  const double need = top_p * total;
  size_t lo = 0, hi = scratch.size();  // the cut lies in [lo, hi)
  double above = 0.0;                  // weight of everything before lo
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(scratch.begin() + lo, scratch.begin() + mid, scratch.begin() + hi, higher);
    double left = 0.0;  // [lo, mid)
    for (size_t i = lo; i < mid; ++i) left += scratch[i].weight;
    if (above + left >= need) {
      hi = mid;  // the prefix ending before mid already reaches p
    } else if (above + left + scratch[mid].weight >= need) {
      return scratch[mid];
    } else {
      above += left + scratch[mid].weight;
      lo = mid + 1;
    }
  }
  if (hi - lo == 1) return scratch[lo];
  // Rounding left `need` unreached: keep everything (the lowest candidate ends the cut).
  return *std::min_element(scratch.begin(), scratch.end(),
                           [](const Candidate& a, const Candidate& b) { return higher(b, a); });
}

// policy_lse: log sum_v exp(logits[v]), the policy's normaliser.
SampledToken sample_row(const float* logits, int64_t vocab, double policy_lse,
                        const SamplingRow& row) {
  const SamplingParams& params = *row.params;
  std::vector<char> blocked(row.suppressed.empty() ? 0 : vocab, 0);
  for (TokenId id : row.suppressed) {
    if (id >= 0 && id < vocab) blocked[id] = 1;
  }
  auto allowed = [&](int64_t i) { return blocked.empty() || !blocked[i]; };

  SampledToken out;
  if (params.greedy()) {
    int64_t best = -1;
    for (int64_t i = 0; i < vocab; ++i) {
      if (allowed(i) && (best < 0 || logits[i] > logits[best])) best = i;
    }
    if (best < 0) best = 0;  // everything suppressed: cannot happen with a sane vocab
    out.token = static_cast<TokenId>(best);
    out.policy_logprob = static_cast<float>(logits[best] - policy_lse);
    out.sampling_logprob = 0.0f;
    return out;
  }

  const float inv_temperature = static_cast<float>(1.0 / params.temperature);
  std::vector<Candidate> candidates;
  candidates.reserve(static_cast<size_t>(vocab));
  float max_scaled = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) {
    if (!allowed(i)) continue;
    const float scaled = logits[i] * inv_temperature;
    if (scaled == -std::numeric_limits<float>::infinity()) continue;
    candidates.push_back({scaled, static_cast<TokenId>(i), 0.0});
    max_scaled = std::max(max_scaled, scaled);
  }
  if (candidates.empty()) candidates.push_back({0.0f, 0, 0.0});

  // min-p: p_i >= min_p * p_max  <=>  s_i >= s_max + log(min_p).
  if (params.min_p > 0.0) {
    const float floor = max_scaled + static_cast<float>(std::log(params.min_p));
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](const Candidate& c) { return c.scaled_logit < floor; }),
                     candidates.end());
  }
  // top-k, then top-p over what top-k kept (vLLM's order). The survivors end in
  // vocabulary order, which the draw below walks.
  if (params.top_k > 0 && params.top_k < static_cast<int64_t>(candidates.size())) {
    std::nth_element(candidates.begin(), candidates.begin() + (params.top_k - 1), candidates.end(),
                     higher);
    candidates.resize(params.top_k);
    std::sort(candidates.begin(), candidates.end(),
              [](const Candidate& a, const Candidate& b) { return a.token < b.token; });
  }
  for (auto& c : candidates) c.weight = std::exp(static_cast<double>(c.scaled_logit - max_scaled));
  if (params.top_p < 1.0) {
    std::vector<Candidate> scratch = candidates;
    const Candidate cut = top_p_cut(scratch, params.top_p);
    candidates.erase(std::remove_if(candidates.begin(), candidates.end(),
                                    [&](const Candidate& c) { return higher(cut, c); }),
                     candidates.end());
  }

  // Inverse-CDF draw over the kept candidates in vocabulary order.
  double kept_total = 0.0;
  for (const auto& c : candidates) kept_total += c.weight;
  const double target = sampling_uniform(row.seed, row.step) * kept_total;
  double cumulative = 0.0;
  const Candidate* chosen = &candidates.back();  // rounding can leave target == total
  for (const auto& c : candidates) {
    cumulative += c.weight;
    if (cumulative > target) {
      chosen = &c;
      break;
    }
  }
  out.token = chosen->token;
  out.policy_logprob = static_cast<float>(logits[chosen->token] - policy_lse);
  out.sampling_logprob =
      static_cast<float>(chosen->scaled_logit - max_scaled - std::log(kept_total));
  return out;
}

}  // namespace

double sampling_uniform(uint64_t seed, int64_t step) {
  const uint64_t bits =
      splitmix64(seed ^ splitmix64(static_cast<uint64_t>(step) + 0x5851F42D4C957F2DULL));
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);  // 53 bits
}

std::vector<SampledToken> sample_tokens(const torch::Tensor& logits,
                                        const std::vector<SamplingRow>& rows) {
  TORCH_CHECK(logits.dim() == 2, "sample_tokens: logits must be [B, V]");
  TORCH_CHECK(logits.size(0) == static_cast<int64_t>(rows.size()),
              "sample_tokens: one SamplingRow per logits row");
  const torch::Tensor host = logits.to(torch::kCPU, torch::kFloat32).contiguous();
  const int64_t vocab = host.size(1);
  const float* data = host.data_ptr<float>();
  // Every row's log-sum-exp in fp64 by torch's vectorised, threaded ops: a scalar
  // std::exp loop took about 3 ms per row of 151,936 logits, a few % of a decode step.
  const torch::Tensor policy_lse = torch::logsumexp(host.to(torch::kDouble), {1});
  const double* lse = policy_lse.data_ptr<double>();
  std::vector<SampledToken> sampled(rows.size());
  for (size_t b = 0; b < rows.size(); ++b)
    sampled[b] = sample_row(data + b * vocab, vocab, lse[b], rows[b]);
  return sampled;
}

}  // namespace aspen::rollout
