#include "aspen/train/policy_logprobs.h"

#include "aspen/train/expert_lockstep.h"
#include "aspen/train/imports.h"


#include "aspen/train/pipeline_logprobs.h"
#include "aspen/train/recompute.h"
#include "aspen/util/error.h"

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

MoeRoutingLog routing_replay_log(const QwenForCausalLM& model, const MicroBatch& mb) {
  const char* key = "algorithm.rollout_correction.routing_replay";
  const ModelConfig& config = model->config;
  check_input(config.is_moe(), "needs a mixture-of-experts model", key);
  const auto column = mb.token_columns.find(columns::kBehaviourRoutedExperts);
  check_input(column != mb.token_columns.end() && column->second.dim() == 2,
              "needs the rollout's expert choices (rollout_routed_experts) in the batch", key);
  int64_t sparse = 0;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) sparse += config.is_sparse_layer(i);
  const int64_t k = config.moe.num_experts_per_tok;
  const torch::Tensor& routed = column->second;  // [R, S * k]
  check_input(routed.size(0) == mb.hidden_index.size(0) && routed.size(1) == sparse * k,
              "the rollout recorded " + std::to_string(routed.size(1)) +
                  " expert ids per token, the model routes " + std::to_string(sparse) + " x " +
                  std::to_string(k),
              key);
  const torch::Device device = mb.input_ids.device();
  MoeRoutingLog log;
  log.replay = torch::full({mb.input_ids.size(0), sparse, k}, -1,
                           torch::TensorOptions().dtype(torch::kLong).device(device));
  log.replay.index_copy_(0, mb.hidden_index,
                         routed.to(device, torch::kLong).view({routed.size(0), sparse, k}));
  return log;
}

TokenLogprobs zero_token_logprobs(const TrainBatch& batch, const torch::Tensor& param,
                                  bool with_entropy) {
  const auto dtype = param.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const auto options = torch::TensorOptions().dtype(dtype).device(param.device());
  TokenLogprobs out;
  out.logprobs = torch::zeros({batch.num_response_tokens()}, options);
  if (with_entropy) out.entropy = torch::zeros({batch.num_response_tokens()}, options);
  return out;
}

TokenLogprobs batch_logprobs(QwenForCausalLM& model, const TrainBatch& batch, int64_t max_tokens,
                             const LogprobHeadOptions& head, bool routing_replay) {
  if (model->pp.enabled()) {
    // One stage of a pipeline: the forward-only pass over the stages.
    check_input(!routing_replay, "does not run on pipeline stages (placement.train.pp > 1)",
                "algorithm.rollout_correction.routing_replay");
    return pipeline_batch_logprobs(model, batch, max_tokens, head);
  }
  batch.validate();
  torch::NoGradGuard no_grad;
  const torch::Device device = model->lm_head_weight().device();
  TokenLogprobs out = zero_token_logprobs(batch, model->lm_head_weight(), head.with_entropy);
  const auto dtype = out.logprobs.scalar_type();
  const std::vector<MicroBatch> micro_batches = make_micro_batches(batch, max_tokens, device);
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
    MoeRoutingLog replay;
    if (routing_replay) replay = routing_replay_log(model, mb);
    TokenLogprobs part = response_logprobs(model, mb, head, /*recompute=*/false,
                                           routing_replay ? &replay : nullptr);
    out.logprobs.index_copy_(0, mb.batch_token_index, part.logprobs.to(dtype));
    if (head.with_entropy) out.entropy.index_copy_(0, mb.batch_token_index, part.entropy.to(dtype));
  }
  for (int64_t k = passes; k < target; ++k) {
    padding_pass(model, head, /*recompute=*/false);
  }
  return out;
}

}  // namespace aspen::train
