#include "aspen/kernels/logprob_head.h"

#include <torch/autograd.h>

#include <algorithm>
#include <limits>

namespace aspen {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

torch::ScalarType acc_dtype(const torch::Tensor& hidden) {
  return hidden.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// Scaled logits z = hidden @ weight[begin:begin+n]^T / temperature, [T, n] in `acc`.
torch::Tensor chunk_logits(const torch::Tensor& hidden_acc, const torch::Tensor& weight,
                           int64_t begin, int64_t n, double temperature) {
  torch::Tensor w = weight.narrow(0, begin, n).to(hidden_acc.scalar_type());
  torch::Tensor z = torch::matmul(hidden_acc, w.t());
  if (temperature != 1.0) z.div_(temperature);
  return z;
}

class ChunkedLogprobFunction : public torch::autograd::Function<ChunkedLogprobFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& targets,
                               double temperature, int64_t chunk_size, bool with_entropy) {
    const auto acc = acc_dtype(hidden);
    const int64_t tokens = hidden.size(0);
    const int64_t vocab = weight.size(0);
    torch::Tensor h = hidden.to(acc);
    auto opts = h.options();
    torch::Tensor running_max =
        torch::full({tokens}, -std::numeric_limits<double>::infinity(), opts);
    torch::Tensor sum_exp = torch::zeros({tokens}, opts);
    torch::Tensor sum_exp_logit = torch::zeros({tokens}, opts);
    torch::Tensor target_logit = torch::zeros({tokens}, opts);
    for (int64_t begin = 0; begin < vocab; begin += chunk_size) {
      const int64_t n = std::min(chunk_size, vocab - begin);
      torch::Tensor z = chunk_logits(h, weight, begin, n, temperature);  // [T, n]
      torch::Tensor new_max = torch::maximum(running_max, std::get<0>(z.max(1)));
      torch::Tensor rescale = torch::exp(running_max - new_max);  // exp(-inf) = 0 on chunk 0
      torch::Tensor e = torch::exp(z - new_max.unsqueeze(1));
      sum_exp = sum_exp * rescale + e.sum(1);
      if (with_entropy) sum_exp_logit = sum_exp_logit * rescale + (e * z).sum(1);
      running_max = new_max;
      // The target logit: rows whose target falls in this chunk gather it, others add 0.
      torch::Tensor local = targets - begin;
      torch::Tensor in_chunk = (local >= 0) & (local < n);
      torch::Tensor gathered = z.gather(1, local.clamp(0, n - 1).unsqueeze(1)).squeeze(1);
      target_logit = target_logit + torch::where(in_chunk, gathered, torch::zeros_like(gathered));
    }
    torch::Tensor lse = running_max + torch::log(sum_exp);
    torch::Tensor logprobs = target_logit - lse;
    torch::Tensor mean_logit = with_entropy ? sum_exp_logit / sum_exp : torch::zeros_like(lse);
    ctx->save_for_backward({hidden, weight, targets, lse, mean_logit});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["chunk_size"] = chunk_size;
    const auto out_dtype = acc == torch::kDouble ? torch::kDouble : torch::kFloat;
    if (!with_entropy) return {logprobs.to(out_dtype)};
    return {logprobs.to(out_dtype), (lse - mean_logit).to(out_dtype)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& hidden = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& targets = saved[2];
    const torch::Tensor& lse = saved[3];
    const torch::Tensor& mean_logit = saved[4];
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const int64_t chunk_size = ctx->saved_data["chunk_size"].toInt();
    const auto acc = acc_dtype(hidden);
    const int64_t vocab = weight.size(0);
    torch::Tensor h = hidden.to(acc);
    torch::Tensor grad_lp = grad_outputs[0].defined() ? grad_outputs[0].to(acc) : torch::Tensor();
    torch::Tensor grad_ent = grad_outputs.size() > 1 && grad_outputs[1].defined()
                                 ? grad_outputs[1].to(acc)
                                 : torch::Tensor();
    const bool need_hidden = ctx->needs_input_grad(0);
    const bool need_weight = ctx->needs_input_grad(1);
    torch::Tensor grad_hidden = need_hidden ? torch::zeros_like(h) : torch::Tensor();
    torch::Tensor grad_weight =
        need_weight ? torch::empty({vocab, weight.size(1)}, h.options()) : torch::Tensor();
    for (int64_t begin = 0; begin < vocab; begin += chunk_size) {
      const int64_t n = std::min(chunk_size, vocab - begin);
      torch::Tensor z = chunk_logits(h, weight, begin, n, temperature);  // [T, n]
      torch::Tensor p = torch::exp(z - lse.unsqueeze(1));
      torch::Tensor grad_z = torch::zeros_like(z);
      if (grad_lp.defined()) {
        grad_z -= p * grad_lp.unsqueeze(1);
        torch::Tensor local = targets - begin;
        torch::Tensor in_chunk = (local >= 0) & (local < n);
        torch::Tensor hit = torch::where(in_chunk, grad_lp, torch::zeros_like(grad_lp));
        grad_z.scatter_add_(1, local.clamp(0, n - 1).unsqueeze(1), hit.unsqueeze(1));
      }
      if (grad_ent.defined()) {
        grad_z += p * (mean_logit.unsqueeze(1) - z) * grad_ent.unsqueeze(1);
      }
      if (temperature != 1.0) grad_z.div_(temperature);
      if (need_hidden) {
        grad_hidden.addmm_(grad_z, weight.narrow(0, begin, n).to(acc));
      }
      if (need_weight) {
        grad_weight.narrow(0, begin, n).copy_(torch::matmul(grad_z.t(), h));
      }
    }
    return {need_hidden ? grad_hidden.to(hidden.scalar_type()) : torch::Tensor(),
            need_weight ? grad_weight.to(weight.scalar_type()) : torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

void check_inputs(const torch::Tensor& hidden, const torch::Tensor& weight,
                  const torch::Tensor& targets, const LogprobHeadOptions& options) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1),
              "chunked_logprobs: hidden [T, C] and weight [V, C] expected, got ", hidden.sizes(),
              " and ", weight.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0) &&
                  targets.scalar_type() == torch::kLong,
              "chunked_logprobs: targets [T] int64 expected");
  TORCH_CHECK(options.chunk_size > 0 && options.temperature > 0,
              "chunked_logprobs: chunk_size and temperature must be positive");
  // Range check on host tensors only: on an accelerator it would force a sync per call.
  if (targets.numel() > 0 && targets.device().is_cpu()) {
    TORCH_CHECK(
        targets.min().item<int64_t>() >= 0 && targets.max().item<int64_t>() < weight.size(0),
        "chunked_logprobs: target outside [0, V=", weight.size(0), ")");
  }
}

}  // namespace

TokenLogprobs chunked_logprobs(const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& targets, const LogprobHeadOptions& options) {
  check_inputs(hidden, weight, targets, options);
  variable_list out = ChunkedLogprobFunction::apply(hidden, weight, targets, options.temperature,
                                                    options.chunk_size, options.with_entropy);
  TokenLogprobs result;
  result.logprobs = out[0];
  if (options.with_entropy) result.entropy = out[1];
  return result;
}

TokenLogprobs logprobs_reference(const torch::Tensor& hidden, const torch::Tensor& weight,
                                 const torch::Tensor& targets, const LogprobHeadOptions& options) {
  check_inputs(hidden, weight, targets, options);
  const auto acc = acc_dtype(hidden);
  torch::Tensor logits = torch::matmul(hidden.to(acc), weight.to(acc).t()) / options.temperature;
  torch::Tensor log_probs = torch::log_softmax(logits, -1);
  TokenLogprobs result;
  result.logprobs = log_probs.gather(1, targets.unsqueeze(1)).squeeze(1);
  if (options.with_entropy) result.entropy = -(log_probs.exp() * log_probs).sum(-1);
  return result;
}

}  // namespace aspen
