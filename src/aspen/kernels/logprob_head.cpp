#include "aspen/kernels/logprob_head.h"

#include <torch/autograd.h>

#include "aspen/kernels/imports.h"
#include "aspen/kernels/logprob_chunks.h"

namespace aspen::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The whole vocabulary on this process: one online-softmax pass gives the result.
class ChunkedLogprobFunction : public torch::autograd::Function<ChunkedLogprobFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight, const torch::Tensor& targets,
                               double temperature, int64_t chunk_size, bool with_entropy,
                               bool gemm_in_input_dtype, int64_t saved_logits_max_bytes) {
    const torch::Tensor hidden_gemm = head_gemm_input(hidden, gemm_in_input_dtype);
    torch::Tensor kept;
    const bool keep = keep_head_logits(hidden_gemm, hidden, weight, saved_logits_max_bytes);
    const SoftmaxStats stats = online_softmax_stats(hidden_gemm, weight, targets, temperature,
                                                    chunk_size, with_entropy, keep ? &kept : nullptr);
    return save_head_for_backward(ctx, hidden, weight, targets, finish_head(stats, with_entropy),
                                  temperature, chunk_size, gemm_in_input_dtype, kept);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto [grad_hidden, grad_weight] = head_backward(ctx, grad_outputs);
    return {grad_hidden,     grad_weight,     torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

void check_inputs(const torch::Tensor& hidden, const torch::Tensor& weight,
                  const torch::Tensor& targets, const LogprobHeadOptions& options) {
  check_head_inputs(hidden, weight, targets, options, weight.size(0), "chunked_logprobs");
}

}  // namespace

TokenLogprobs chunked_logprobs(const torch::Tensor& hidden, const torch::Tensor& weight,
                               const torch::Tensor& targets, const LogprobHeadOptions& options) {
  check_inputs(hidden, weight, targets, options);
  variable_list out = ChunkedLogprobFunction::apply(hidden, weight, targets, options.temperature,
                                                    options.chunk_size, options.with_entropy,
                                                    options.gemm_in_input_dtype,
                                                    options.saved_logits_max_bytes);
  TokenLogprobs result;
  result.logprobs = out[0];
  if (options.with_entropy) result.entropy = out[1];
  return result;
}

TokenLogprobs logprobs_reference(const torch::Tensor& hidden, const torch::Tensor& weight,
                                 const torch::Tensor& targets, const LogprobHeadOptions& options) {
  check_inputs(hidden, weight, targets, options);
  const auto acc = head_acc_dtype(hidden);
  torch::Tensor logits = torch::matmul(hidden.to(acc), weight.to(acc).t()) / options.temperature;
  torch::Tensor log_probs = torch::log_softmax(logits, -1);
  TokenLogprobs result;
  result.logprobs = log_probs.gather(1, targets.unsqueeze(1)).squeeze(1);
  if (options.with_entropy) result.entropy = -(log_probs.exp() * log_probs).sum(-1);
  return result;
}

}  // namespace aspen::kernels
