#include "aspen/rollout/device_sampler.h"

#include <cmath>
#include <limits>

#include "aspen/kernels/packed_upload.h"
#include "aspen/rollout/imports.h"

namespace aspen::rollout {
namespace {

constexpr double kNegativeInfinity = -std::numeric_limits<double>::infinity();

// The rows' parameters as the host sampler reads them, staged for one upload.
struct StagedRows {
  std::vector<int64_t> greedy, top_k, suppressed_rows, suppressed_ids;
  // fp32 values (inverse temperature, log min-p) as doubles: exact, and cast back on
  // the device so that the arithmetic there is the host's fp32 arithmetic.
  std::vector<double> inv_temperature, log_min_p, top_p, uniform;
  bool any_sampled = false, any_min_p = false, any_cut = false;
};

StagedRows stage_rows(const std::vector<SamplingRow>& rows, int64_t vocab) {
  StagedRows staged;
  for (size_t r = 0; r < rows.size(); ++r) {
    const SamplingRow& row = rows[r];
    const SamplingParams& params = *row.params;
    const bool greedy = params.greedy();
    staged.greedy.push_back(greedy ? 1 : 0);
    staged.inv_temperature.push_back(
        greedy ? 1.0 : static_cast<double>(static_cast<float>(1.0 / params.temperature)));
    const bool min_p = !greedy && params.min_p > 0.0;
    staged.log_min_p.push_back(
        min_p ? static_cast<double>(static_cast<float>(std::log(params.min_p))) : kNegativeInfinity);
    // top-k keeps the top_k best candidates (all of them when there are fewer).
    const bool top_k = !greedy && params.top_k > 0 && params.top_k < vocab;
    staged.top_k.push_back(top_k ? params.top_k : vocab);
    staged.top_p.push_back(greedy ? 1.0 : params.top_p);
    staged.uniform.push_back(greedy ? 0.0 : sampling_uniform(row.seed, row.step));
    staged.any_sampled = staged.any_sampled || !greedy;
    staged.any_min_p = staged.any_min_p || min_p;
    staged.any_cut = staged.any_cut || top_k || (!greedy && params.top_p < 1.0);
    for (TokenId id : row.suppressed) {
      if (id < 0 || id >= vocab) continue;
      staged.suppressed_rows.push_back(static_cast<int64_t>(r));
      staged.suppressed_ids.push_back(id);
    }
  }
  return staged;
}

// The first index along dim 1 where `condition` holds, and whether it holds anywhere.
std::pair<torch::Tensor, torch::Tensor> first_true(const torch::Tensor& condition) {
  return {condition.to(torch::kByte).argmax(1, /*keepdim=*/true),
          condition.any(1, /*keepdim=*/true)};
}

}  // namespace

std::vector<SampledToken> sample_tokens_on_device(const torch::Tensor& logits,
                                                  const std::vector<SamplingRow>& rows) {
  TORCH_CHECK(logits.dim() == 2, "sample_tokens_on_device: logits must be [B, V]");
  TORCH_CHECK(logits.size(0) == static_cast<int64_t>(rows.size()),
              "sample_tokens_on_device: one SamplingRow per logits row");
  const int64_t count = logits.size(0), vocab = logits.size(1);
  if (count == 0) return {};
  const StagedRows staged = stage_rows(rows, vocab);
  kernels::PackedUpload upload;
  const size_t greedy_part = upload.add(staged.greedy), top_k_part = upload.add(staged.top_k),
               rows_part = upload.add(staged.suppressed_rows),
               ids_part = upload.add(staged.suppressed_ids),
               inv_temperature_part = upload.add_doubles(staged.inv_temperature),
               log_min_p_part = upload.add_doubles(staged.log_min_p),
               top_p_part = upload.add_doubles(staged.top_p),
               uniform_part = upload.add_doubles(staged.uniform);
  upload.upload(logits.device());
  auto column = [&](size_t part, torch::ScalarType dtype) {  // [R] staged -> [R, 1]
    torch::Tensor values = upload.part(part);
    if (dtype != torch::kLong) values = values.view(torch::kDouble).to(dtype);
    return values.unsqueeze(1);
  };

  const torch::Tensor x = logits.to(torch::kFloat);
  const torch::Tensor policy_lse = torch::logsumexp(x.to(torch::kDouble), {1}, /*keepdim=*/true);
  torch::Tensor blocked;  // [R, V] bool, undefined when nothing is suppressed
  if (!staged.suppressed_ids.empty()) {
    blocked = torch::zeros({count, vocab}, x.options().dtype(torch::kBool));
    blocked.index_put_({upload.part(rows_part), upload.part(ids_part)}, true);
  }
  const float minus_inf = -std::numeric_limits<float>::infinity();
  // Greedy: the first best allowed logit.
  torch::Tensor token =
      (blocked.defined() ? x.masked_fill(blocked, minus_inf) : x).argmax(1, /*keepdim=*/true);
  torch::Tensor sampling_logprob = torch::zeros({count, 1}, x.options().dtype(torch::kDouble));

  if (staged.any_sampled) {
    torch::Tensor scaled = x * column(inv_temperature_part, torch::kFloat);
    if (blocked.defined()) scaled = scaled.masked_fill(blocked, minus_inf);
    const torch::Tensor max_scaled = scaled.amax(1, /*keepdim=*/true);
    if (staged.any_min_p) {  // p >= min_p * p_max  <=>  s >= s_max + log(min_p)
      const torch::Tensor floor = max_scaled + column(log_min_p_part, torch::kFloat);
      scaled = scaled.masked_fill(scaled < floor, minus_inf);
    }
    const torch::Tensor rank = torch::arange(vocab, x.options().dtype(torch::kLong)).unsqueeze(0);
    torch::Tensor keep = scaled != minus_inf;  // the candidates
    if (staged.any_cut) {
      // Candidates best first, ties by the lower id (a stable sort keeps id order).
      const auto [sorted, order] = scaled.sort(/*stable=*/true, /*dim=*/1, /*descending=*/true);
      torch::Tensor keep_sorted = (sorted != minus_inf) & (rank < column(top_k_part, torch::kLong));
      const torch::Tensor weights_sorted =
          torch::where(keep_sorted, (sorted - max_scaled).to(torch::kDouble).exp(), 0.0);
      // top-p: keep the shortest best-first prefix whose weight reaches top_p of the total.
      const torch::Tensor top_p = column(top_p_part, torch::kDouble);
      const torch::Tensor need = top_p * weights_sorted.sum(1, /*keepdim=*/true);
      const auto [cut, reached] = first_true((weights_sorted.cumsum(1) >= need) & keep_sorted);
      const torch::Tensor last_rank = torch::full_like(cut, vocab);
      keep_sorted = keep_sorted & (rank <= torch::where(reached & (top_p < 1.0), cut, last_rank));
      keep = torch::zeros_like(keep).scatter(1, order, keep_sorted);
    }
    // Inverse-CDF draw over the kept tokens in vocabulary order.
    const torch::Tensor weights =
        torch::where(keep, (scaled - max_scaled).to(torch::kDouble).exp(), 0.0);
    const torch::Tensor cumulative = weights.cumsum(1);
    const torch::Tensor kept_total = cumulative.narrow(1, vocab - 1, 1);
    const auto [drawn, found] =
        first_true(cumulative > column(uniform_part, torch::kDouble) * kept_total);
    // Rounding can leave the target at the total: the last kept token then.
    const torch::Tensor last_kept =
        torch::where(keep, rank, -1).amax(1, /*keepdim=*/true).clamp_min(0);
    const torch::Tensor sampled = torch::where(found, drawn, last_kept);
    const torch::Tensor greedy = column(greedy_part, torch::kLong) != 0;
    token = torch::where(greedy, token, sampled);
    const torch::Tensor drawn_logprob =
        (scaled.gather(1, sampled) - max_scaled).to(torch::kDouble) - kept_total.log();
    sampling_logprob = torch::where(greedy, sampling_logprob, drawn_logprob);
  }
  const torch::Tensor policy_logprob = x.gather(1, token).to(torch::kDouble) - policy_lse;
  // The one device-to-host copy: [R, 3] fp64 (ids are exact in fp64).
  const torch::Tensor result =
      torch::cat({token.to(torch::kDouble), policy_logprob, sampling_logprob}, 1)
          .to(torch::kCPU)
          .contiguous();
  const double* values = result.data_ptr<double>();
  std::vector<SampledToken> sampled(static_cast<size_t>(count));
  for (int64_t r = 0; r < count; ++r) {
    sampled[r].token = static_cast<TokenId>(values[3 * r]);
    sampled[r].policy_logprob = static_cast<float>(values[3 * r + 1]);
    sampled[r].sampling_logprob = static_cast<float>(values[3 * r + 2]);
  }
  return sampled;
}

}  // namespace aspen::rollout
