#include "aspen/train/pipeline_actor.h"

#include <cmath>
#include <string>
#include <utility>

#include "aspen/train/imports.h"
#include "aspen/train/pipeline_runner.h"
#include "aspen/util/error.h"

namespace aspen::train {

PipelineActorPass::PipelineActorPass(QwenForCausalLM model,
                                     const std::vector<MicroBatch>& micro_batches)
    : model_(std::move(model)), pass_(stage_forward(model_), micro_batches) {}

TokenLogprobs PipelineActorPass::response_logprobs(const MicroBatch& micro_batch,
                                                   const LogprobHeadOptions& head,
                                                   MoeRoutingLog* routing) {
  const torch::Tensor hidden = pass_.forward(micro_batch, routing);
  return model_->head_logprobs(hidden.index_select(0, micro_batch.hidden_index),
                               micro_batch.target_ids, head);
}

void PipelineActorPass::finish(QwenForCausalLM& master) {
  pass_.finish();
  if (pass_.empty()) return;  // no backward ran: nothing to sum
  sum_tied_embedding_gradient(master);
}

void share_last_stage_metrics(const QwenForCausalLM& model, ActorMetrics& m) {
  const PipelineStages& pp = model->pp;
  if (!pp.enabled()) return;
  std::vector<double*> reals = {
      &m.policy_loss, &m.kl_loss, &m.router_aux_loss, &m.router_load_max,
      &m.router_load_mean, &m.router_topk_mismatch, &m.entropy, &m.clip_frac,
      &m.approx_kl, &m.grad_norm, &m.lr, &m.rollout_logprob_diff_mean,
      &m.rollout_logprob_diff_max, &m.correction_capped_frac, &m.rollout_is_mean,
      &m.rollout_is_ratio_mean, &m.rollout_is_ratio_max, &m.rollout_is_ratio_min,
      &m.rollout_is_truncated_frac, &m.rollout_rs_masked_frac, &m.rollout_corr_kl};
  std::vector<int64_t*> counts = {&m.router_topk_compared, &m.steps, &m.skipped_steps,
                                  &m.tokens, &m.micro_batches, &m.rollout_logprob_diff_tokens};
  torch::Tensor values = torch::zeros({static_cast<int64_t>(reals.size() + counts.size())},
                                      torch::kDouble);
  double* v = values.data_ptr<double>();
  for (size_t i = 0; i < reals.size(); ++i) v[i] = *reals[i];
  for (size_t i = 0; i < counts.size(); ++i) v[reals.size() + i] = static_cast<double>(*counts[i]);
  ProcessGroupHandle group = pp.require_group("actor metrics");
  group.broadcast(values, pp.size - 1);
  v = values.data_ptr<double>();
  for (size_t i = 0; i < reals.size(); ++i) *reals[i] = v[i];
  for (size_t i = 0; i < counts.size(); ++i) {
    *counts[i] = static_cast<int64_t>(std::llround(v[reals.size() + i]));  // exact below 2^53
  }
}

}  // namespace aspen::train
