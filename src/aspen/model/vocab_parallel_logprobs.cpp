#include "aspen/model/vocab_parallel_logprobs.h"

#include <torch/autograd.h>

#include "aspen/kernels/logprob_chunks.h"
#include "aspen/model/imports.h"
#include "aspen/parallel/tp_collectives.h"

namespace aspen::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Turns this rank's stats over its vocabulary rows into stats over the whole
// vocabulary, identical on every rank. The three all-reduces of the contract.
void combine_over_vocab_shards(SoftmaxStats& stats, bool with_entropy, ProcessGroupHandle group) {
  // Independent of the max: started first so that it overlaps the other two.
  PendingWork target_sum = group.all_reduce_async(stats.target_logit, ReduceOp::kSum);
  torch::Tensor global_max = stats.running_max.clone();
  group.all_reduce(global_max, ReduceOp::kMax);
  // Each rank's sums are relative to its own max; bring them to the global one.
  const torch::Tensor rescale = torch::exp(stats.running_max - global_max);
  torch::Tensor sums = with_entropy
                           ? torch::stack({stats.sum_exp * rescale, stats.sum_exp_logit * rescale})
                           : (stats.sum_exp * rescale).unsqueeze(0);
  group.all_reduce(sums, ReduceOp::kSum);
  target_sum.wait();
  stats.running_max = global_max;
  stats.sum_exp = sums[0];
  if (with_entropy) stats.sum_exp_logit = sums[1];
}

// Output-equivalent to ChunkedLogprobFunction on the full head; the gradient it
// returns for hidden is this rank's partial sum (see the header).
class VocabParallelLogprobFunction
    : public torch::autograd::Function<VocabParallelLogprobFunction> {
 public:
  // local_targets: targets - vocab_begin, i.e. row indices of weight_shard (outside
  // [0, V/t) for tokens another rank owns).
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& hidden,
                               const torch::Tensor& weight_shard,
                               const torch::Tensor& local_targets, double temperature,
                               int64_t chunk_size, bool with_entropy,
                               int64_t saved_logits_max_bytes, const ProcessGroupHandle& group) {
    const torch::Tensor hidden_gemm = head_gemm_input(hidden, false);
    torch::Tensor kept;
    const bool keep = keep_head_logits(hidden_gemm, hidden, weight_shard, saved_logits_max_bytes);
    SoftmaxStats stats = online_softmax_stats(hidden_gemm, weight_shard, local_targets, temperature,
                                              chunk_size, with_entropy, keep ? &kept : nullptr);
    // Every TP rank scores the same tokens, so either all or none have none.
    if (hidden.size(0) > 0) combine_over_vocab_shards(stats, with_entropy, group);
    return save_head_for_backward(ctx, hidden, weight_shard, local_targets,
                                  finish_head(stats, with_entropy), temperature, chunk_size,
                                  /*gemm_in_input_dtype=*/false, kept);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto [grad_hidden, grad_weight] = head_backward(ctx, grad_outputs);
    return {grad_hidden,     grad_weight,     torch::Tensor(), torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

TokenLogprobs vocab_parallel_logprobs(const torch::Tensor& hidden,
                                      const torch::Tensor& weight_shard,
                                      const torch::Tensor& targets, int64_t vocab_begin,
                                      const LogprobHeadOptions& options, const TensorParallel& tp) {
  if (!tp.enabled()) {
    TORCH_CHECK(vocab_begin == 0, "vocab_parallel_logprobs: vocab_begin ", vocab_begin,
                " without tensor parallelism");
    return chunked_logprobs(hidden, weight_shard, targets, options);
  }
  check_head_inputs(hidden, weight_shard, targets, options, weight_shard.size(0) * tp.size,
                    "vocab_parallel_logprobs");
  variable_list out = VocabParallelLogprobFunction::apply(
      copy_to_tp_region(hidden, tp), weight_shard, targets - vocab_begin, options.temperature,
      options.chunk_size, options.with_entropy, options.saved_logits_max_bytes,
      tp.require_group("vocab_parallel_logprobs"));
  TokenLogprobs result;
  result.logprobs = out[0];
  if (options.with_entropy) result.entropy = out[1];
  return result;
}

}  // namespace aspen::model
