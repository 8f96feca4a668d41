#include "aspen/kernels/logprob_chunks.h"

#include <algorithm>
#include <limits>

#include "aspen/kernels/imports.h"
#include "aspen/kernels/logprob_chunk_cpu.h"

namespace aspen::kernels {
namespace {

// Scaled logits z = hidden @ weight[begin:begin+n]^T / temperature, [T, n] in the
// accumulation dtype; the GEMM runs in hidden_gemm's dtype (the accumulation dtype, or
// bf16 with LogprobHeadOptions::gemm_in_input_dtype).
torch::Tensor chunk_logits(const torch::Tensor& hidden_gemm, const torch::Tensor& weight,
                           int64_t begin, int64_t n, double temperature) {
  torch::Tensor w = weight.narrow(0, begin, n).to(hidden_gemm.scalar_type());
  torch::Tensor z = torch::matmul(hidden_gemm, w.t()).to(head_acc_dtype(hidden_gemm));
  if (temperature != 1.0) z.div_(temperature);
  return z;
}

// The fused CPU loops (logprob_chunk_cpu.h) take fp32 statistics on CPU tensors; fp64
// and accelerators keep the composed ops.
bool fused_cpu_head(const torch::Tensor& hidden_gemm) {
  const auto dtype = hidden_gemm.scalar_type();
  return logprob_chunk_cpu_available() && hidden_gemm.device().is_cpu() &&
         (dtype == torch::kFloat || dtype == torch::kBFloat16);
}

// bf16 GEMMs on the fused CPU path lay each chunk out transposed, [n, T]: oneDNN runs
// the weight gradient g^T @ h at 1.7x the time per FLOP when g^T is a transposed view,
// and the head's GEMMs and loops in a 103M bf16 update went from 1.68 to 1.21 s of
// operator time (docs/benchmark-history.md). fp32 GEMMs (MKL) take either layout at full speed.
bool transposed_chunks(const torch::Tensor& hidden_gemm) {
  return fused_cpu_head(hidden_gemm) && hidden_gemm.scalar_type() == torch::kBFloat16;
}

// The raw GEMM output of one chunk, hidden @ weight[begin:begin+n]^T in hidden_gemm's
// dtype ([n, T], its transpose, when `transposed`), written into `buffer` (grown on
// demand, reused across chunks: a fresh 19.5 MB tensor per chunk cost page faults on
// every step). With `keep`: into keep's elements from `offset` instead (the kept logits).
torch::Tensor chunk_gemm_into(const torch::Tensor& hidden_gemm, const torch::Tensor& weight,
                              int64_t begin, int64_t n, bool transposed, torch::Tensor& buffer,
                              const torch::Tensor& keep = torch::Tensor(), int64_t offset = 0) {
  const torch::Tensor w = weight.narrow(0, begin, n).to(hidden_gemm.scalar_type());
  const int64_t tokens = hidden_gemm.size(0);
  if (!keep.defined() && (!buffer.defined() || buffer.numel() < tokens * n)) {
    buffer = torch::empty({tokens * n}, hidden_gemm.options());
  }
  const torch::Tensor flat =
      keep.defined() ? keep.narrow(0, offset, tokens * n) : buffer.narrow(0, 0, tokens * n);
  if (transposed) {
    torch::Tensor logits_t = flat.view({n, tokens});
    torch::mm_out(logits_t, w, hidden_gemm.t());
    return logits_t;
  }
  torch::Tensor logits = flat.view({tokens, n});
  torch::mm_out(logits, hidden_gemm, w.t());
  return logits;
}

}  // namespace

torch::ScalarType head_acc_dtype(const torch::Tensor& hidden) {
  return hidden.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

void check_head_inputs(const torch::Tensor& hidden, const torch::Tensor& weight,
                       const torch::Tensor& targets, const LogprobHeadOptions& options,
                       int64_t vocab, const char* caller) {
  TORCH_CHECK(hidden.dim() == 2 && weight.dim() == 2 && hidden.size(1) == weight.size(1), caller,
              ": hidden [T, C] and weight [V, C] expected, got ", hidden.sizes(), " and ",
              weight.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0) &&
                  targets.scalar_type() == torch::kLong,
              caller, ": targets [T] int64 expected");
  TORCH_CHECK(options.chunk_size > 0 && options.temperature > 0, caller,
              ": chunk_size and temperature must be positive");
  TORCH_CHECK(options.saved_logits_max_bytes >= 0, caller, ": saved_logits_max_bytes must be >= 0");
  // Range check on host tensors only: on an accelerator it would force a sync per call.
  if (targets.numel() > 0 && targets.device().is_cpu()) {
    TORCH_CHECK(targets.min().item<int64_t>() >= 0 && targets.max().item<int64_t>() < vocab, caller,
                ": target outside [0, V=", vocab, ")");
  }
}

torch::Tensor head_gemm_input(const torch::Tensor& hidden, bool gemm_in_input_dtype) {
  return gemm_in_input_dtype ? hidden : hidden.to(head_acc_dtype(hidden));
}

bool keep_head_logits(const torch::Tensor& hidden_gemm, const torch::Tensor& hidden,
                      const torch::Tensor& weight, int64_t max_bytes) {
  const bool gradient = hidden.requires_grad() || weight.requires_grad();
  const double bytes = static_cast<double>(hidden_gemm.size(0)) * weight.size(0) *
                       static_cast<double>(hidden_gemm.element_size());
  return gradient && fused_cpu_head(hidden_gemm) && bytes <= static_cast<double>(max_bytes);
}

SoftmaxStats online_softmax_stats(const torch::Tensor& hidden_gemm, const torch::Tensor& weight,
                                  const torch::Tensor& targets, double temperature,
                                  int64_t chunk_size, bool with_entropy,
                                  torch::Tensor* kept_logits) {
  const int64_t tokens = hidden_gemm.size(0);
  const int64_t rows = weight.size(0);
  auto opts = hidden_gemm.options().dtype(head_acc_dtype(hidden_gemm));
  SoftmaxStats s;
  s.running_max = torch::full({tokens}, -std::numeric_limits<double>::infinity(), opts);
  s.sum_exp = torch::zeros({tokens}, opts);
  s.sum_exp_logit = torch::zeros({tokens}, opts);
  s.target_logit = torch::zeros({tokens}, opts);
  if (fused_cpu_head(hidden_gemm)) {
    const torch::Tensor contiguous_targets = targets.contiguous();
    const bool transposed = transposed_chunks(hidden_gemm);
    torch::Tensor buffer;
    if (kept_logits != nullptr) *kept_logits = torch::empty({tokens * rows}, hidden_gemm.options());
    for (int64_t begin = 0; begin < rows; begin += chunk_size) {
      const int64_t n = std::min(chunk_size, rows - begin);
      const torch::Tensor logits =
          kept_logits != nullptr
              ? chunk_gemm_into(hidden_gemm, weight, begin, n, transposed, buffer, *kept_logits,
                                tokens * begin)
              : chunk_gemm_into(hidden_gemm, weight, begin, n, transposed, buffer);
      if (transposed) {
        logprob_chunk_stats_t_cpu(logits, temperature, contiguous_targets, begin, with_entropy,
                                  s.running_max, s.sum_exp, s.sum_exp_logit, s.target_logit);
      } else {
        logprob_chunk_stats_cpu(logits, temperature, contiguous_targets, begin, with_entropy,
                                s.running_max, s.sum_exp, s.sum_exp_logit, s.target_logit);
      }
    }
    return s;
  }
  for (int64_t begin = 0; begin < rows; begin += chunk_size) {
    const int64_t n = std::min(chunk_size, rows - begin);
    torch::Tensor z = chunk_logits(hidden_gemm, weight, begin, n, temperature);  // [T, n]
    torch::Tensor new_max = torch::maximum(s.running_max, std::get<0>(z.max(1)));
    torch::Tensor rescale = torch::exp(s.running_max - new_max);  // exp(-inf) = 0 on chunk 0
    torch::Tensor e = torch::exp(z - new_max.unsqueeze(1));
    s.sum_exp = s.sum_exp * rescale + e.sum(1);
    if (with_entropy) s.sum_exp_logit = s.sum_exp_logit * rescale + (e * z).sum(1);
    s.running_max = new_max;
    // The target logit: rows whose target falls in this chunk gather it, others add 0.
    torch::Tensor local = targets - begin;
    torch::Tensor in_chunk = (local >= 0) & (local < n);
    torch::Tensor gathered = z.gather(1, local.clamp(0, n - 1).unsqueeze(1)).squeeze(1);
    s.target_logit = s.target_logit + torch::where(in_chunk, gathered, torch::zeros_like(gathered));
  }
  return s;
}

HeadResult finish_head(const SoftmaxStats& stats, bool with_entropy) {
  HeadResult r;
  r.lse = stats.running_max + torch::log(stats.sum_exp);
  r.logprobs = stats.target_logit - r.lse;
  r.mean_logit = with_entropy ? stats.sum_exp_logit / stats.sum_exp : torch::zeros_like(r.lse);
  if (with_entropy) r.entropy = r.lse - r.mean_logit;
  return r;
}

torch::autograd::variable_list save_head_for_backward(
    torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden, const torch::Tensor& weight,
    const torch::Tensor& targets, const HeadResult& result, double temperature, int64_t chunk_size,
    bool gemm_in_input_dtype, const torch::Tensor& kept_logits) {
  ctx->save_for_backward({hidden, weight, targets, result.lse, result.mean_logit, kept_logits});
  ctx->saved_data["temperature"] = temperature;
  ctx->saved_data["chunk_size"] = chunk_size;
  ctx->saved_data["gemm_in_input_dtype"] = gemm_in_input_dtype;
  const auto out_dtype = head_acc_dtype(hidden);
  if (!result.entropy.defined()) return {result.logprobs.to(out_dtype)};
  return {result.logprobs.to(out_dtype), result.entropy.to(out_dtype)};
}

std::pair<torch::Tensor, torch::Tensor> head_backward(
    torch::autograd::AutogradContext* ctx, const torch::autograd::variable_list& grad_outputs) {
  const auto saved = ctx->get_saved_variables();
  const torch::Tensor& hidden = saved[0];
  const torch::Tensor& weight = saved[1];
  const torch::Tensor& targets = saved[2];
  const torch::Tensor& lse = saved[3];
  const torch::Tensor& mean_logit = saved[4];
  const torch::Tensor& kept_logits = saved[5];  // undefined: recompute
  const double temperature = ctx->saved_data["temperature"].toDouble();
  const int64_t chunk_size = ctx->saved_data["chunk_size"].toInt();
  const bool low_precision = ctx->saved_data["gemm_in_input_dtype"].toBool();
  const auto acc = head_acc_dtype(hidden);
  const auto gemm_dtype = low_precision ? hidden.scalar_type() : acc;
  const int64_t rows = weight.size(0);
  const torch::Tensor h = head_gemm_input(hidden, low_precision);
  torch::Tensor grad_lp = grad_outputs[0].defined() ? grad_outputs[0].to(acc) : torch::Tensor();
  torch::Tensor grad_ent = grad_outputs.size() > 1 && grad_outputs[1].defined()
                               ? grad_outputs[1].to(acc)
                               : torch::Tensor();
  const bool need_hidden = ctx->needs_input_grad(0);
  const bool need_weight = ctx->needs_input_grad(1);
  const auto acc_options = hidden.options().dtype(acc);
  torch::Tensor grad_hidden =
      need_hidden ? torch::zeros(hidden.sizes(), acc_options) : torch::Tensor();
  // With the GEMMs in the weight's own dtype, each chunk's grad_weight product is
  // written in place; otherwise it is computed in the GEMM dtype and copied to acc.
  const auto grad_weight_dtype = weight.scalar_type() == gemm_dtype ? gemm_dtype : acc;
  torch::Tensor grad_weight =
      need_weight ? torch::empty({rows, weight.size(1)}, hidden.options().dtype(grad_weight_dtype))
                  : torch::Tensor();
  const bool fused = fused_cpu_head(h);
  const torch::Tensor contiguous_targets = fused ? targets.contiguous() : targets;
  if (fused && grad_lp.defined()) grad_lp = grad_lp.contiguous();  // often an expanded scalar
  if (fused && grad_ent.defined()) grad_ent = grad_ent.contiguous();
  const bool transposed = transposed_chunks(h);
  torch::Tensor logits_buffer, grad_buffer;
  const int64_t tokens = hidden.size(0);
  for (int64_t begin = 0; begin < rows; begin += chunk_size) {
    const int64_t n = std::min(chunk_size, rows - begin);
    // d loss / d logits of this chunk in the GEMM dtype: [T, n], or [n, T] when transposed
    torch::Tensor g;
    if (fused) {
      const torch::Tensor logits =
          kept_logits.defined() ? kept_logits.narrow(0, tokens * begin, tokens * n)
                                      .view(transposed ? std::vector<int64_t>{n, tokens}
                                                       : std::vector<int64_t>{tokens, n})
                                : chunk_gemm_into(h, weight, begin, n, transposed, logits_buffer);
      if (!grad_buffer.defined()) grad_buffer = torch::empty({tokens * n}, h.options());
      g = grad_buffer.narrow(0, 0, tokens * n).view(logits.sizes());
      if (transposed) {
        logprob_chunk_grad_t_cpu(logits, temperature, contiguous_targets, begin, lse, grad_lp,
                                 grad_ent, mean_logit, g);
      } else {
        logprob_chunk_grad_cpu(logits, temperature, contiguous_targets, begin, lse, grad_lp,
                               grad_ent, mean_logit, g);
      }
    } else {
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
      // Low precision: grad_z rounded to the GEMM dtype, the products added in acc.
      g = grad_z.to(gemm_dtype);
    }
    const torch::Tensor w = weight.narrow(0, begin, n).to(gemm_dtype);
    const torch::Tensor g_rows = transposed ? g.t() : g;     // [T, n]
    const torch::Tensor g_columns = transposed ? g : g.t();  // [n, T]
    if (need_hidden) {
      if (low_precision) {
        grad_hidden.add_(torch::matmul(g_rows, w));
      } else {
        grad_hidden.addmm_(g_rows, w);
      }
    }
    if (need_weight) {
      torch::Tensor rows_grad = grad_weight.narrow(0, begin, n);
      if (grad_weight_dtype == gemm_dtype) {
        torch::mm_out(rows_grad, g_columns, h);
      } else {
        rows_grad.copy_(torch::matmul(g_columns, h));
      }
    }
  }
  return {need_hidden ? grad_hidden.to(hidden.scalar_type()) : torch::Tensor(),
          need_weight ? grad_weight.to(weight.scalar_type()) : torch::Tensor()};
}

}  // namespace aspen::kernels
