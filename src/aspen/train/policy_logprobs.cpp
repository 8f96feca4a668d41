#include "aspen/train/policy_logprobs.h"

#include "aspen/train/expert_lockstep.h"
#include "aspen/train/imports.h"

#include <numeric>

#include "aspen/train/recompute.h"

namespace aspen::train {

TokenLogprobs response_logprobs(QwenForCausalLM& model, const MicroBatch& micro_batch,
                                const LogprobHeadOptions& head, bool recompute,
                                MoeRoutingLog* routing) {
  torch::Tensor hidden = decoder_hidden(*model->model, micro_batch.input_ids,
                                        micro_batch.cu_seqlens, recompute, routing);
  // The model's own head: vocab-parallel on a tensor-parallel model.
  return model->head_logprobs(hidden.index_select(0, micro_batch.hidden_index),
                              micro_batch.target_ids, head);
}

TokenLogprobs batch_logprobs(QwenForCausalLM& model, const TrainBatch& batch, int64_t max_tokens,
                             const LogprobHeadOptions& head) {
  batch.validate();
  torch::NoGradGuard no_grad;
  const torch::Device device = model->lm_head_weight().device();
  const auto dtype =
      model->lm_head_weight().scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto options = torch::TensorOptions().dtype(dtype).device(device);
  TokenLogprobs out;
  out.logprobs = torch::zeros({batch.num_response_tokens()}, options);
  if (head.with_entropy) out.entropy = torch::zeros({batch.num_response_tokens()}, options);
  std::vector<int64_t> rows(static_cast<size_t>(batch.num_rows()));
  std::iota(rows.begin(), rows.end(), 0);
  const std::vector<MicroBatch> micro_batches = make_micro_batches(batch, rows, max_tokens, device);
  // Expert parallelism: agree on the pass count first (one collective, before any
  // pass's), then pad up to it.
  const int64_t passes = static_cast<int64_t>(micro_batches.size());
  const int64_t target = lockstep_count(model, passes);
  for (const MicroBatch& mb : micro_batches) {
    if (mb.num_response_tokens == 0) {
      // An expert-parallel model's forwards are collectives: join them anyway.
      if (in_expert_lockstep(model)) padding_pass(model, head, /*recompute=*/false);
      continue;
    }
    TokenLogprobs part = response_logprobs(model, mb, head, /*recompute=*/false);
    out.logprobs.index_copy_(0, mb.batch_token_index, part.logprobs.to(dtype));
    if (head.with_entropy) out.entropy.index_copy_(0, mb.batch_token_index, part.entropy.to(dtype));
  }
  for (int64_t k = passes; k < target; ++k) {
    padding_pass(model, head, /*recompute=*/false);
  }
  return out;
}

}  // namespace aspen::train
